"""Survey pages. Access through `experiments.access`: owners import; owners, analysts and
viewers see studies (counts, exclusions, samples) and a survey run's dashboard (numbers only);
only the roles that read participant text see a respondent's items with predicted and recorded
options (and every such view is audited). Synthetic studies say so on every page."""
import tempfile
from pathlib import Path

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST

from experiments.access import AGGREGATE_READERS, OWNERS, TEXT_READERS, membership_for, run_for
from experiments.analysis.exports import csv_text
from experiments.data.audit_log import Kind, audit_record
from experiments.core.survey.prompt import condition_label
from experiments.core.survey.reader import parse_json_text, parse_jsonl_text, read_survey_path
from experiments.core.survey.records import SurveyImportError, SurveyProblem
from experiments.data.import_jobs import QueueUnavailable
from experiments.data.survey_import_jobs import (
    survey_background_bytes, survey_import_enqueue, survey_too_large_message, survey_upload_limit_bytes,
)
from experiments.data.survey_import_jobs import survey_import_progress as survey_import_progress_of
from experiments.execution.policy import offline_roles
from experiments.models import SurveyAnswer, SurveyItem, SurveyStudy
from experiments.data.surveys import draw_further_sample, sample_respondents, sample_study, study_samples, survey_import
from experiments.web.bounded_input import BoundedIntegerField
from experiments.web.projects.forms import MultipleFileField, declared_upload_over
from experiments.web.text_input import StorableTextMixin
from experiments.analysis import survey_figures as figures


class SurveyImportForm(forms.Form):
    name = forms.CharField(max_length=80, help_text="the study's name in this project")
    files = MultipleFileField(help_text="wave_split parquet chunks, or the same rows as .jsonl or .json")
    synthetic = forms.BooleanField(required=False, help_text="invented respondents: labelled synthetic everywhere")

    def clean_files(self):
        files = self.cleaned_data["files"]
        total = sum(f.size for f in files)
        if total > survey_upload_limit_bytes():
            raise forms.ValidationError(survey_too_large_message(total))
        return files


def _read_upload(upload):
    name = upload.name.lower()
    if name.endswith(".parquet"):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / Path(upload.name).name
            with path.open("wb") as out:
                for chunk in upload.chunks():
                    out.write(chunk)
            return read_survey_path(path)
    try:
        text = upload.read().decode("utf-8")
    except UnicodeDecodeError as error:
        raise SurveyImportError([SurveyProblem(upload.name, "", "", "", f"not valid UTF-8 at byte {error.start}")])
    if name.endswith(".jsonl"):
        return parse_jsonl_text(text, upload.name)
    if name.endswith(".json"):
        return parse_json_text(text, upload.name)
    raise SurveyImportError([SurveyProblem(upload.name, "", "", "", "unknown file type: give .parquet, .jsonl or .json")])


@csrf_exempt
@login_required
def survey_import_view(request, slug):
    """Template experiments/surveys/import.html: owners upload a study, imported whole or not at all.

    An upload larger than OWNWORDS_SURVEY_MAX_UPLOAD_MB is refused from its Content-Length before
    its body is read (so this outer view runs before the CSRF check, which would read the body;
    the inner one is CSRF-protected). Files over OWNWORDS_SURVEY_BACKGROUND_MB in all import as a
    background job, followed on its progress page; smaller ones import in the request."""
    membership = membership_for(request, slug, roles=OWNERS)
    if (declared := declared_upload_over(request, survey_upload_limit_bytes())) is not None:
        return _import_page(request, membership, SurveyImportForm(), survey_too_large_message(declared), 413)
    return _survey_import_checked(request, membership)


@csrf_protect
def _survey_import_checked(request, membership):
    project = membership.project
    error = None
    if request.method == "POST":
        form = SurveyImportForm(request.POST, request.FILES)
        if form.is_valid():
            uploads, name = form.cleaned_data["files"], form.cleaned_data["name"]
            try:
                if sum(u.size for u in uploads) > survey_background_bytes():
                    if SurveyStudy.objects.filter(project=project, name=name).exists():
                        raise SurveyImportError([SurveyProblem(", ".join(u.name for u in uploads), "", "", "", (
                            f"a survey study named {name!r} exists in this project already"))])
                    job_id = survey_import_enqueue(project=project, uploads=uploads, name=name,
                                                   synthetic=form.cleaned_data["synthetic"], user=request.user)
                    return redirect("survey_import_progress", slug=project.slug, job_id=job_id)
                respondents, problems = [], []
                for upload in uploads:
                    try:
                        respondents += _read_upload(upload)
                    except SurveyImportError as exc:
                        problems += exc.problems
                if problems:
                    raise SurveyImportError(problems)
                result = survey_import(project=project, name=name, respondents=respondents,
                                       sources=[u.name for u in uploads],
                                       synthetic=form.cleaned_data["synthetic"], user=request.user)
            except SurveyImportError as exc:
                error = str(exc)
            except QueueUnavailable:
                error = ("Nothing imported: the files are large enough to import in the background, and the "
                         "background queue does not answer. Try again later, or use manage.py import_survey.")
            else:
                messages.success(request, f"{result.imported} respondent(s) imported; "
                                          f"{result.excluded_respondents} excluded by the leak check.")
                return redirect("survey_study", slug=project.slug, pk=result.study.pk)
    else:
        form = SurveyImportForm()
    return _import_page(request, membership, form, error, 400 if error else 200)


def _import_page(request, membership, form, error, status):
    return render(request, "experiments/surveys/import.html",
                  {"membership": membership, "project": membership.project, "form": form, "error": error,
                   "max_upload_mb": survey_upload_limit_bytes() / 2**20,
                   "background_mb": survey_background_bytes() / 2**20}, status=status)


@login_required
def survey_import_progress(request, slug, job_id):
    """Template experiments/surveys/import_progress.html: a background survey import's progress (owners)."""
    membership = membership_for(request, slug, roles=OWNERS)
    progress = survey_import_progress_of(job_id, membership.project)
    if progress is None:
        raise Http404("No such import")
    return render(request, "experiments/surveys/import_progress.html",
                  {"membership": membership, "project": membership.project, "progress": progress})


class FurtherSampleForm(StorableTextMixin, forms.Form):
    """A sample of new respondents (App. H, Table 23): the next of the study's seeded order outside
    the chosen earlier samples."""
    name = forms.CharField(max_length=100, help_text="the new sample's name in this project")
    size = BoundedIntegerField(min_value=1, max_value=100_000, help_text="respondents in the new sample")
    exclude = forms.ModelMultipleChoiceField(queryset=None, required=False, widget=forms.CheckboxSelectMultiple,
                                             help_text="earlier samples whose respondents it leaves out")

    def __init__(self, *args, samples, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["exclude"].queryset = samples
        self.fields["exclude"].initial = list(samples)


@login_required
def survey_study(request, slug, pk):
    """Template experiments/surveys/study.html: counts, exclusions with reasons, samples (with the
    samples each excludes), and for owners and analysts the form that draws a further sample."""
    membership = membership_for(request, slug, roles=AGGREGATE_READERS)
    study = get_object_or_404(SurveyStudy, project=membership.project, pk=pk)
    samples = membership.project.cohorts.filter(task_set__isnull=True, rule__study=study.name).order_by("pk")
    return render(request, "experiments/surveys/study.html", {
        "membership": membership, "project": membership.project, "study": study,
        "respondents": study.respondents.count(), "items": SurveyItem.objects.filter(respondent__study=study).count(),
        "exclusions": study.exclusions.all(), "samples": samples,
        "sample_form": FurtherSampleForm(samples=samples) if membership.can_read_text() else None,
    })


@login_required
@require_POST
def survey_sample_draw(request, slug, pk):
    """Draw a further sample of new respondents from the study (owners and analysts); back to the study."""
    membership = membership_for(request, slug, roles=TEXT_READERS)
    study = get_object_or_404(SurveyStudy, project=membership.project, pk=pk)
    samples = membership.project.cohorts.filter(pk__in=[c.pk for c in study_samples(study)]).order_by("pk")
    form = FurtherSampleForm(request.POST, samples=samples)
    if not form.is_valid():
        messages.error(request, "No sample drawn: " + "; ".join(
            f"{field}: {' '.join(errors)}" for field, errors in form.errors.items()))
        return redirect("survey_study", slug=slug, pk=study.pk)
    try:
        cohort = draw_further_sample(study=study, name=form.cleaned_data["name"], size=form.cleaned_data["size"],
                                     excluded=list(form.cleaned_data["exclude"]), user=request.user)
    except SurveyImportError as exc:
        messages.error(request, f"No sample drawn: {exc}")
    else:
        messages.success(request, f"Sample {cohort.name!r}: {cohort.requested_size} new respondent(s).")
    return redirect("survey_study", slug=slug, pk=study.pk)


def _survey_run(request, slug, pk, roles):
    membership, run = run_for(request, slug, pk, roles=roles)
    if run.protocol.kind != run.protocol.Kind.SURVEY:
        raise Http404("Not a survey run")
    return membership, run


@login_required
def survey_dashboard(request, slug, pk):
    """Template experiments/surveys/dashboard.html: a survey run's numbers (no participant text)."""
    membership, run = _survey_run(request, slug, pk, AGGREGATE_READERS)
    data = run.analysis if run.analysis.get("kind") == "survey" else None
    study = sample_study(run.protocol.cohort)
    context = {"membership": membership, "project": membership.project, "run": run, "data": data,
               "study": study, "offline": offline_roles(run.protocol)["any"]}
    if data:
        context.update(means=figures.condition_means(data["means"]), forest=figures.contrast_forest(
            data["contrasts"], {m["condition"]: m["label"] for m in data["means"]}))
    return render(request, "experiments/surveys/dashboard.html", context)


SURVEY_CSV = {
    "means": ["condition", "label", "accuracy", "deviation", "people", "items", "unscored", "reference",
              "accuracy_lo", "accuracy_hi", "deviation_lo", "deviation_hi"],
    "contrasts": ["first", "second", "metric", "estimate", "lo", "hi", "people"],
    "criteria": ["label", "first", "second", "metric", "rule", "met", "sentence"],
}


@login_required
def survey_dashboard_csv(request, slug, pk, table):
    """One table of a survey run's dashboard as CSV (numbers only; the app's one CSV rule)."""
    membership, run = _survey_run(request, slug, pk, AGGREGATE_READERS)
    data = run.analysis if run.analysis.get("kind") == "survey" else None
    if table not in SURVEY_CSV or data is None:
        return HttpResponse("No such table, or the analysis is not computed yet.", status=404,
                            content_type="text/plain")
    audit_record(request, membership.project, Kind.EXPORT, f"run {run.pk}: survey table {table} (CSV)")
    response = HttpResponse(csv_text(SURVEY_CSV[table], data[table]), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-survey-{table}.csv"'
    return response


@login_required
def survey_respondents(request, slug, pk):
    """Template experiments/surveys/respondents.html: the run's respondents (text readers)."""
    membership, run = _survey_run(request, slug, pk, TEXT_READERS)
    audit_record(request, membership.project, Kind.TASK, f"survey respondents of run {run.pk}")
    return render(request, "experiments/surveys/respondents.html", {
        "membership": membership, "project": membership.project, "run": run,
        "respondents": sample_respondents(run.protocol.cohort), "study": sample_study(run.protocol.cohort)})


@login_required
def survey_respondent(request, slug, pk, respondent):
    """Template experiments/surveys/respondent.html: each item with the predicted option of every
    condition beside the recorded wave-4 and waves 1-3 options (text readers; audited)."""
    membership, run = _survey_run(request, slug, pk, TEXT_READERS)
    row = next((r for r in sample_respondents(run.protocol.cohort) if r.pk == respondent), None)
    if row is None:
        raise Http404("No such respondent in this run")
    audit_record(request, membership.project, Kind.TASK, f"survey respondent {row.pid} of run {run.pk}")
    conditions = list(run.protocol.conditions)
    answers = {a.condition: a for a in SurveyAnswer.objects.filter(run=run, respondent=row)}
    items = []
    for item in SurveyItem.objects.filter(respondent=row).order_by("number"):
        predicted = []
        for key in conditions:
            answer = answers.get(key)
            entry = answer.items[item.number - 1] if answer and len(answer.items) >= item.number else None
            option, problem = (entry[0], entry[1]) if entry else (None, answer.error or answer.status if answer else "")
            predicted.append({"option": option, "text": item.options[option - 1] if option else "",
                              "problem": problem, "hit": option == item.wave4})
        items.append({"item": item, "predicted": predicted, "recorded": item.options[item.wave4 - 1],
                      "earlier": item.options[item.earlier - 1] if item.earlier else ""})
    return render(request, "experiments/surveys/respondent.html", {
        "membership": membership, "project": membership.project, "run": run, "respondent": row,
        "study": row.study, "items": items, "offline": offline_roles(run.protocol)["any"],
        "conditions": [(key, condition_label(key, screener=run.protocol.survey_screener)) for key in conditions],
        "answers": [answers.get(key) for key in conditions]})
