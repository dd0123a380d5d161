"""Survey studies as data: importing validated respondents whole or not at all, the
seeded samples as cohorts, and rebuilding a stored respondent for the core.

The core (`experiments.core.survey`) reads and validates the files and checks leaks; this module
stores what it returns: respondents who passed, their target items (with the recorded wave-4 and
the waves 1-3 options), and every exclusion with its reason. A respondent's blocks are stored as
JSON of the core's own records, so a run rebuilds exactly the `Respondent` that was validated."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Length

from experiments.core.canonical import canonical_json, sha256_text
from experiments.core.survey.prepare import PreparedStream, prepared_batches
from experiments.core.survey.records import Block, Question, Respondent, SurveyImportError, SurveyProblem
from experiments.core.survey.targets import DEVELOPMENT_SIZE, REPORTED_SIZE, further_sample, respondent_samples
from experiments.core.survey.scores import SURVEY_SEED
from experiments.data.import_store import cycle_collector_paused
from experiments.models import (
    Cohort, Project, SurveyExclusion, SurveyItem, SurveyRespondent, SurveySampleMember, SurveyStudy,
)
from experiments.data.survey_store import SurveyWriter
from experiments.data.survey_store_sql import use_fast_compression

SAMPLE_NAMES = ("development", "reported")


@dataclass(frozen=True)
class SurveyImportResult:
    study: SurveyStudy
    imported: int
    excluded: list[str]  # one sentence per violation, naming respondent and question
    samples: list[Cohort]
    excluded_respondents: int


# --- blocks as JSON and back ----------------------------------------------------------------------

def _tupled(value):
    return tuple(_tupled(v) for v in value) if isinstance(value, list) else value


def blocks_from_json(text: str) -> tuple[Block, ...]:
    return tuple(Block(index, name, raw, tuple(Question(*(_tupled(field) for field in q)) for q in questions))
                 for index, name, raw, questions in json.loads(text))


def respondent_record(row: SurveyRespondent) -> Respondent:
    """The core's respondent of a stored row (participant text: callers check the role)."""
    return Respondent(pid=row.pid, persona_text=row.persona_text, persona=blocks_from_json(row.persona_json),
                      earlier=blocks_from_json(row.earlier_json), wave4=blocks_from_json(row.wave4_json),
                      location=row.location)


# --- import -------------------------------------------------------------------------------------

def survey_import_workers() -> int:
    """Processes that read and prepare an import's respondents (`prepare.PreparedStream`)."""
    return int(settings.OWNWORDS_SURVEY_IMPORT_WORKERS)


def sample_sizes(n: int) -> tuple[int, int]:
    """The paper's 200 + 400 when there are enough respondents; else a third and the rest."""
    if n >= DEVELOPMENT_SIZE + REPORTED_SIZE:
        return DEVELOPMENT_SIZE, REPORTED_SIZE
    development = max(1, n // 3)
    return development, n - development


def survey_import(*, project: Project, name: str, respondents: Iterable[Respondent] | PreparedStream,
                  sources: list[str], synthetic: bool = False, user=None, seed: int = SURVEY_SEED,
                  sizes: tuple[int, int] | None = None, on_batch=None) -> SurveyImportResult:
    """Store a study's respondents, exclusions and seeded samples in one transaction.

    `respondents`: a list, the reader's stream (`reader.iter_survey_path`), or a `PreparedStream`
    (read and prepared in worker processes while this writes). Each batch is written as it comes;
    `on_batch(respondents read so far)` is called after each. Raises SurveyImportError (nothing
    stored) for a name in use, any problem of the input (a stream raises after its last row), a
    respondent without a usable screener, too few respondents for the samples asked, or nothing
    left after the leak check."""
    where = ", ".join(sources)
    if not name or len(name) > 80:
        raise SurveyImportError([SurveyProblem(where, "", "", "", "the study needs a name of 1-80 characters")])
    if SurveyStudy.objects.filter(project=project, name=name).exists():
        raise SurveyImportError([SurveyProblem(where, "", "", "",
                                               f"a survey study named {name!r} exists in this project already")])
    batches = respondents if isinstance(respondents, PreparedStream) else prepared_batches(respondents)
    with cycle_collector_paused(), transaction.atomic():
        use_fast_compression()
        study = SurveyStudy.objects.create(project=project, name=name, source_files=list(sources),
                                           synthetic=synthetic, imported_by=user)
        writer = SurveyWriter(study)
        for batch in batches:
            writer.write(batch)
            if on_batch is not None:
                on_batch(writer.read)
        if writer.problems:
            raise SurveyImportError(writer.problems)
        if not writer.kept:
            raise SurveyImportError([SurveyProblem(where, "", "", "", "no respondent is left after the leak check")])
        sizes = sizes or sample_sizes(len(writer.kept))
        try:
            samples = respondent_samples([entry[1] for entry in writer.kept], seed=seed, sizes=sizes)
        except ValueError as error:
            raise SurveyImportError([SurveyProblem(where, "", "", "", str(error))]) from None
        study.rows_read = writer.read
        study.save(update_fields=["rows_read"])
        SurveyExclusion.objects.bulk_create([
            SurveyExclusion(study=study, pid=v.pid, kind=v.kind, detail=v.detail) for v in writer.violations
        ])
        kept = {entry[1]: entry for entry in writer.kept}
        cohorts = [_sample_cohort(project, study, label, [kept[pid] for pid in pids], seed, user, sizes)
                   for label, pids in zip(SAMPLE_NAMES, samples)]
    return SurveyImportResult(study, len(writer.kept), [str(v) for v in writer.violations], cohorts,
                              len({v.pid for v in writer.violations}))


def canonical_respondent_list(respondents) -> str:
    """What a survey sample is hashed by: one JSON line per respondent (pid, persona text, wave-4
    blocks as stored), text through its sha256."""
    return canonical_hashed_list((pid, sha256_text(persona), sha256_text(wave4)) for pid, persona, wave4 in respondents)


def canonical_hashed_list(respondents) -> str:
    """`canonical_respondent_list` of (pid, persona sha256, wave-4 sha256)."""
    return "".join(canonical_json({"pid": pid, "persona_sha256": persona, "wave4_sha256": wave4}) + "\n"
                   for pid, persona, wave4 in respondents)


def sample_list_sha256(cohort: Cohort) -> str:
    """The hash of a survey sample's respondents as stored now (sealing compares it)."""
    return sha256_text(canonical_respondent_list((r.pid, r.persona_text, r.wave4_json)
                                                 for r in sample_respondents(cohort)))


def _sample_cohort(project, study, label, members, seed, user, sizes) -> Cohort:
    cohort = Cohort.objects.create(
        project=project, task_set=None, name=f"{study.name} {label}", seed=seed, requested_size=len(members),
        rule={"kind": "survey sample", "study": study.name, "sample": label, "sizes": list(sizes),
              "order": "core.survey.targets.seeded_order", "synthetic": study.synthetic},
        task_list_sha256=sha256_text(canonical_hashed_list(m[1:] for m in members)), created_by=user,
    )
    SurveySampleMember.objects.bulk_create([SurveySampleMember(cohort=cohort, respondent_id=m[0], position=i)
                                            for i, m in enumerate(members)])
    return cohort


# --- a further sample of new respondents ----------------------------------------------------------

def study_samples(study: SurveyStudy) -> list[Cohort]:
    """The study's samples, oldest first."""
    return list(study.project.cohorts.filter(task_set__isnull=True, rule__study=study.name).order_by("pk"))


def draw_further_sample(*, study: SurveyStudy, name: str, size: int, excluded: list[Cohort],
                        seed: int | None = None, user=None) -> Cohort:
    """A sample of `size` respondents of the study who are in none of the `excluded` samples (App. H,
    the second sample of Table 23): the first of the study's seeded order, the seed the excluded
    samples were cut with unless another is given. The cohort records the samples it excludes
    (`excluded_cohorts`, and their names in its rule). Raises SurveyImportError, nothing stored,
    for a name in use, a sample of another study, mixed seeds or too few new respondents."""
    def refuse(message):
        return SurveyImportError([SurveyProblem(study.name, "", "", "", message)])

    name = (name or "").strip()
    if not name or len(name) > 100:
        raise refuse("the sample needs a name of 1-100 characters")
    if Cohort.objects.filter(project=study.project, name=name).exists():
        raise refuse(f"a cohort named {name!r} exists in this project already")
    for cohort in excluded:
        if cohort.project_id != study.project_id or not is_survey_cohort(cohort) or \
                cohort.rule.get("study") != study.name:
            raise refuse(f"{cohort.name!r} is not a sample of the survey study {study.name!r}")
    if seed is None:
        seeds = {cohort.seed for cohort in excluded} or {SURVEY_SEED}
        if len(seeds) > 1:
            raise refuse("the excluded samples were cut with different seeds; give the seed")
        seed = seeds.pop()
    rows = list(study.respondents.order_by("pk").values_list("pk", "pid"))
    excluded_pids = set(SurveySampleMember.objects.filter(cohort__in=excluded)
                        .values_list("respondent__pid", flat=True))
    try:
        pids = further_sample([row[1] for row in rows], seed=seed, size=size, exclude=excluded_pids)
    except ValueError as error:
        raise refuse(str(error)) from None
    ids = {pid: pk for pk, pid in rows}
    chosen = [ids[pid] for pid in pids]
    texts = SurveyRespondent.objects.filter(pk__in=chosen).values_list("pk", "pid", "persona_text", "wave4_json")
    hashed = {pk: (pid, sha256_text(persona), sha256_text(wave4))
              for pk, pid, persona, wave4 in texts.iterator(chunk_size=100)}
    members = [(pk, *hashed[pk]) for pk in chosen]
    excluded = sorted(excluded, key=lambda cohort: cohort.pk)
    with transaction.atomic():
        cohort = Cohort.objects.create(
            project=study.project, task_set=None, name=name, seed=seed, requested_size=size,
            rule={"kind": "survey sample", "study": study.name, "sample": "further", "sizes": [size],
                  "order": "core.survey.targets.seeded_order", "synthetic": study.synthetic,
                  "excludes": [cohort.name for cohort in excluded],
                  "excludes_ids": [cohort.pk for cohort in excluded]},
            task_list_sha256=sha256_text(canonical_hashed_list(m[1:] for m in members)), created_by=user,
        )
        cohort.excluded_cohorts.set(excluded)
        SurveySampleMember.objects.bulk_create([SurveySampleMember(cohort=cohort, respondent_id=m[0], position=i)
                                                for i, m in enumerate(members)])
    return cohort


# --- reading back --------------------------------------------------------------------------------

def is_survey_cohort(cohort: Cohort) -> bool:
    return cohort.task_set_id is None


def is_further_sample(cohort: Cohort) -> bool:
    """A sample of new respondents drawn outside earlier samples (`draw_further_sample`; Table 23)."""
    return is_survey_cohort(cohort) and (cohort.rule or {}).get("sample") == "further"


def sample_respondents(cohort: Cohort) -> list[SurveyRespondent]:
    return [m.respondent for m in SurveySampleMember.objects.filter(cohort=cohort)
            .select_related("respondent__study").order_by("position")]


def sample_persona_lengths(cohort: Cohort) -> list[tuple[int, int]]:
    """(respondent id, persona length in characters) of a sample's members, in sample order: the
    lengths counted by the database, so an estimate does not load every persona."""
    return list(SurveySampleMember.objects.filter(cohort=cohort).order_by("position")
                .annotate(chars=Length("respondent__persona_text")).values_list("respondent_id", "chars"))


def sample_study(cohort: Cohort) -> SurveyStudy | None:
    member = SurveySampleMember.objects.filter(cohort=cohort).select_related("respondent__study").first()
    return member.respondent.study if member else None


def respondent_items(respondent_ids) -> dict[int, list[SurveyItem]]:
    items: dict[int, list[SurveyItem]] = {}
    for item in SurveyItem.objects.filter(respondent_id__in=list(respondent_ids)).order_by("respondent_id", "number"):
        items.setdefault(item.respondent_id, []).append(item)
    return items
