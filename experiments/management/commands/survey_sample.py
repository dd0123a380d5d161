"""survey_sample: draw a further sample of new respondents from a survey study (App. H, the second
sample of Table 23): the next respondents of the study's seeded order who are in none of the
excluded samples (by default every earlier sample of the study). The new sample records which
samples it excludes."""
from django.core.management.base import BaseCommand, CommandError

from experiments.core.interviews.records import printable
from experiments.core.survey.records import SurveyImportError
from experiments.data.surveys import draw_further_sample, study_samples
from experiments.models import Project, SurveyStudy


class Command(BaseCommand):
    help = "Draw a sample of new respondents from a survey study, excluding earlier samples."

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--study", required=True, help="the survey study's name")
        parser.add_argument("--name", required=True, help="the new sample's (cohort's) name")
        parser.add_argument("--size", type=int, required=True, help="respondents in the new sample")
        parser.add_argument("--exclude", action="append", default=None,
                            help="name of an earlier sample to exclude (repeat; default: every earlier sample)")
        parser.add_argument("--seed", type=int, default=None, help="default: the excluded samples' seed")

    def handle(self, project, study, name, size, exclude, seed, **options):
        found = SurveyStudy.objects.filter(project__slug=project, name=study).first()
        if found is None or not Project.objects.filter(slug=project).exists():
            raise CommandError(f"no survey study {printable(study)!r} in project {printable(project)!r}")
        samples = study_samples(found)
        if exclude is None:
            excluded = samples
        else:
            by_name = {c.name: c for c in samples}
            unknown = [n for n in exclude if n not in by_name]
            if unknown:
                raise CommandError(f"not a sample of {printable(study)!r}: {', '.join(map(printable, unknown))}")
            excluded = [by_name[n] for n in exclude]
        try:
            cohort = draw_further_sample(study=found, name=name, size=size, excluded=excluded, seed=seed)
        except SurveyImportError as exc:
            raise CommandError(str(exc)) from None
        excludes = ", ".join(repr(n) for n in cohort.rule["excludes"]) or "none"
        return (f"sample {printable(cohort.name)!r}: {cohort.requested_size} new respondent(s), seed {cohort.seed}, "
                f"excluding {excludes}")
