import secrets
import time
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from experiments.core.interviews.readers import read_interview_path
from experiments.core.survey.prompt import SURVEY_CONDITIONS
from experiments.core.survey.reader import read_survey_path
from experiments.core.tasks import TaskRule
from experiments.data.members import member_ensure, project_create
from experiments.data.sessions import CohortError, cohort_draw, sessions_import
from experiments.data.surveys import survey_import
from experiments.execution.control import run_start
from experiments.execution.driver import run_inline
from experiments.execution.jobs import run_enqueue
from experiments.execution.sealing import protocol_seal
from experiments.models import Project, Protocol, Role, Run

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "sample_data"
SAMPLE_SOURCES = [
    ("anthropic-csv", SAMPLE_DIR / "anthropic-interviewer" / "creatives_transcripts.csv"),
    ("anthropic-csv", SAMPLE_DIR / "anthropic-interviewer" / "scientists_transcripts.csv"),
    ("genagents", SAMPLE_DIR / "genagents-sample"),
]
# The sample interviews are short: under the paper's 12 pairs / 5 targets only 8 of
# 251 sessions qualify, so the demo loosens the thresholds and says so on its page.
DEMO_RULE = TaskRule(min_pairs=8, min_targets=3, max_targets=5)
DEMO_COHORT = {"name": "demo", "size": 24, "seed": 20260918}
# The first five people of the demo cohort (the same seeded draw, stopped at five: `core.cohorts.draw_cohort`
# takes people in one order whatever the size), for the paraphrase-controls run: a quarter of the demo
# run's calls, so bin/demo stays about as quick.
DEMO_CONTROLS_COHORT = {"name": "demo (first 5)", "size": 5, "seed": DEMO_COHORT["seed"]}
DEMO_USERS = [("demo", Role.OWNER), ("demo-viewer", Role.VIEWER)]
OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
MEMORY_ONE_SHOT = "memory(concrete,100w)+one-shot"
# The bundled SYNTHETIC Twin-2K-500-shaped sample (invented respondents, labelled on every page).
SURVEY_SAMPLE = SAMPLE_DIR / "twin2k_synthetic" / "wave_split_synthetic.jsonl"
SURVEY_STUDY = "twin2k-synthetic"
SURVEY_PROJECT = "demo-survey"
DEMO_SURVEY_PROTOCOL = {
    "name": "demo-survey-offline",
    "conditions": list(SURVEY_CONDITIONS),  # all six, in the paper's order
    "generator": OFFLINE,
    "judge": OFFLINE,
    "concurrency": {"offline": 4},
    "bootstrap": {"draws": 2_000},
}
DEMO_PROTOCOL = {
    "name": "demo-offline",
    "conditions": [MEMORY_ONE_SHOT, "memory(concrete,100w)+selection(3)", "ownwords(B=|memory|)", "whole-record"],
    "generator": OFFLINE,
    "judge": OFFLINE,
    "concurrency": {"offline": 4},
    "contrasts": [
        {"name": "OwnWords minus memory", "terms": {"ownwords(B=|memory|)": 1, MEMORY_ONE_SHOT: -1},
         "family": True, "criterion": "interval_above_zero"},
        {"name": "Whole record minus memory", "terms": {"whole-record": 1, MEMORY_ONE_SHOT: -1}, "family": True},
        {"name": "Selection minus one-shot",
         "terms": {"memory(concrete,100w)+selection(3)": 1, MEMORY_ONE_SHOT: -1}, "family": True},
    ],
    "bootstrap": {"seed": 20260918, "draws": 20_000},
}
OWNWORDS = "ownwords(B=|memory|)"
# The wording controls beyond the paper, small: OwnWords verbatim and with its evidence in other words
# (paraphrase-controls), and the memory's and OwnWords' answers each rewritten in other words
# (answer-controls), on DEMO_CONTROLS_COHORT; the demo's content-check campaign asks raters whether each
# rewrite kept the content.
DEMO_CONTROLS_PROTOCOL = {
    "name": "demo-controls-offline",
    "cohort": DEMO_CONTROLS_COHORT["name"],
    "conditions": [MEMORY_ONE_SHOT, OWNWORDS, f"{OWNWORDS}+paraphrased", f"{MEMORY_ONE_SHOT}+answer-paraphrased",
                   f"{OWNWORDS}+answer-paraphrased"],
    "generator": OFFLINE,
    "judge": OFFLINE,
    "concurrency": {"offline": 4},
    "contrasts": [
        {"name": "OwnWords: verbatim − paraphrased", "terms": {OWNWORDS: 1, f"{OWNWORDS}+paraphrased": -1},
         "family": False},
        {"name": "OwnWords − memory", "terms": {OWNWORDS: 1, MEMORY_ONE_SHOT: -1}, "family": False},
        {"name": "paraphrased OwnWords − memory", "terms": {f"{OWNWORDS}+paraphrased": 1, MEMORY_ONE_SHOT: -1},
         "family": False},
    ],
    "bootstrap": {"seed": 20260922, "draws": 10_000},
}


DEMO_PATH = "manage.py demo_setup"


def demo_project(*, slug: str, name: str, owner) -> tuple[Project, bool]:
    """The demo project `slug`, created through the members service with `owner` as its owner, so
    the audit log's "changed the members" shows how it came to be."""
    project = Project.objects.filter(slug=slug).first()
    if project is not None:
        return project, False
    return project_create(user=owner, name=name, slug=slug, path=DEMO_PATH), True


class Command(BaseCommand):
    help = "Create the demo project from the bundled public interviews, a demo cohort and demo logins."

    def add_arguments(self, parser):
        parser.add_argument(
            "--queue", action="store_true",
            help="run the demo protocol through the RQ queues (a worker must be running) instead of inline",
        )

    def handle(self, queue, **options):
        lines = []
        with transaction.atomic():
            User = get_user_model()
            owner, _ = User.objects.get_or_create(username=DEMO_USERS[0][0])
            project, created = demo_project(slug="demo", name="Demo: Anthropic Interviewer and genagents (public data)",
                                            owner=owner)
            if created or not project.sessions.exists():
                for fmt, path in SAMPLE_SOURCES:
                    summary = sessions_import(
                        project=project,
                        parsed=read_interview_path(path, fmt),
                        source_format=fmt,
                        source_file=path.name,
                        task_rule=DEMO_RULE,
                    )
                    lines.append(f"{path.name}: {summary}")
            else:
                lines.append("demo project exists already; sample data not imported again")
            for spec in (DEMO_COHORT, DEMO_CONTROLS_COHORT):
                if not project.cohorts.filter(name=spec["name"]).exists():
                    try:
                        cohort = cohort_draw(project=project, **spec)
                        lines.append(f"cohort '{cohort.name}': {cohort.cohort_tasks.count()} tasks")
                    except CohortError as exc:
                        lines.append(f"no demo cohort '{spec['name']}': {exc}")
            for username, role in DEMO_USERS:
                # A fresh password on every run, printed once, so no default
                # password ever exists in the code or the database.
                password = secrets.token_urlsafe(9)
                user, _ = User.objects.get_or_create(username=username)
                user.set_password(password)
                user.save()
                member_ensure(project=project, user=user, role=role, actor=owner, path=DEMO_PATH)
                lines.append(f"login: {username} / {password}  ({role.label.lower()})")
            # The admin (/admin/ and the queue dashboard) for the demo: a superuser, no project role;
            # it reads every project as an analyst (access.SUPERUSER_ROLE).
            password = secrets.token_urlsafe(9)
            admin, _ = User.objects.get_or_create(username="demo-admin")
            admin.is_staff = admin.is_superuser = True
            admin.set_password(password)
            admin.save()
            lines.append(f"admin login: demo-admin / {password}  (superuser: /admin/, and reads every project)")
        lines.append(self._demo_run(project, queue, {**DEMO_PROTOCOL, "cohort": DEMO_COHORT["name"]}))
        lines.append(self._demo_run(project, queue, DEMO_CONTROLS_PROTOCOL))
        lines.append(self._demo_survey(queue))
        return "\n".join(lines)

    def _demo_survey(self, queue):
        """The synthetic survey sample in a project of its own (the demo's logins keep their roles
        there) and a small offline survey protocol on its development sample."""
        with transaction.atomic():
            User = get_user_model()
            owner = User.objects.get(username=DEMO_USERS[0][0])
            project, _ = demo_project(slug=SURVEY_PROJECT, name="Demo survey: SYNTHETIC Twin-2K-500-shaped respondents",
                                      owner=owner)
            for username, role in DEMO_USERS:
                member_ensure(project=project, user=User.objects.get(username=username), role=role, actor=owner,
                              path=DEMO_PATH)
            if project.protocols.filter(name=DEMO_SURVEY_PROTOCOL["name"]).exists():
                return "demo survey protocol exists already; no new survey run"
            if not project.survey_studies.filter(name=SURVEY_STUDY).exists():
                survey_import(project=project, name=SURVEY_STUDY, respondents=read_survey_path(SURVEY_SAMPLE),
                              sources=[SURVEY_SAMPLE.name], synthetic=True)
            cohort = project.cohorts.get(name=f"{SURVEY_STUDY} development")
            protocol = protocol_seal(protocol=Protocol.objects.create(
                project=project, cohort=cohort, kind=Protocol.Kind.SURVEY, **DEMO_SURVEY_PROTOCOL), user=None)
            run = Run.objects.create(protocol=protocol)
            run_start(run=run)
        page = f"/p/{project.slug}/runs/{run.pk}/survey/"
        if queue:
            run_enqueue(run.pk)
            return f"survey run {run.pk} (SYNTHETIC respondents, offline stand-in) goes through the queue; see {page}"
        Run.objects.filter(pk=run.pk).update(inline=True)
        run = run_inline(run.pk)
        return (f"survey run {run.pk} of '{protocol.name}' on the SYNTHETIC sample ran inline: {run.status} "
                f"(offline stand-in, not a model); see {page}")

    def _demo_run(self, project, queue, spec):
        """A small protocol (`spec`, its cohort by name) answered and graded by the offline stand-in."""
        if project.protocols.filter(name=spec["name"]).exists():
            return f"demo protocol '{spec['name']}' exists already; no new run"
        spec = dict(spec)
        cohort = project.cohorts.get(name=spec.pop("cohort"))
        protocol = Protocol.objects.create(project=project, cohort=cohort, kind=Protocol.Kind.INTERVIEW, **spec)
        protocol = protocol_seal(protocol=protocol, user=None)
        run = Run.objects.create(protocol=protocol)
        run_start(run=run)
        page = f"/p/{project.slug}/runs/{run.pk}/"
        if queue:
            run_enqueue(run.pk)
            return (f"run {run.pk} of '{protocol.name}' goes through the queue (offline stand-in, not a model); "
                    f"watch it at {page}")
        Run.objects.filter(pk=run.pk).update(inline=True)
        started = time.monotonic()
        run = run_inline(run.pk)
        return (f"run {run.pk} of '{protocol.name}' ran inline, without a queue (no Redis reachable): "
                f"{run.status} in {time.monotonic() - started:.1f} s (offline stand-in, not a model); see {page}")
