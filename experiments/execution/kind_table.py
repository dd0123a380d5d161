"""What each kind of protocol takes — its planners, its analysis, its pages, its seal rules — in one table.

`Protocol.kind` says what a protocol is about (interviews, a survey, a re-grade of a finished run);
`kind_rules(protocol)` is the only place that turns it into behaviour. The driver plans a phase with
`planners[phase]` and analyses a run with `summary`; sealing hashes `prompt_names` and the task list of
`task_list_sha256`; the pages send a run to its `dashboard` and, where tasks are not what it has, to
its `respondents` page. Nothing here enters a seal by itself: a seal is computed exactly as before
the kind was stored.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from django.db.models import CharField, Func

from experiments.analysis.dashboard import dashboard_refresh, run_summary
from experiments.analysis.judges import judge_comparison
from experiments.analysis.pairwise_verdicts import pairwise_summary
from experiments.analysis.survey_results import survey_summary
from experiments.core.assembly import PAIRWISE_JUDGE_PROMPTS
from experiments.core.canonical import canonical_json, sha256_text
from experiments.core.conditions import JUDGE_PROMPTS, get_condition
from experiments.data.sessions import canonical_task_lines
from experiments.data.surveys import canonical_hashed_list
from experiments.execution.code_version import code_version
from experiments.execution.planning import PLANNERS
from experiments.execution.pairwise_judge import plan_pairwise_judging
from experiments.execution.regrade import plan_regrade
from experiments.execution.survey_planning import SURVEY_PLANNERS, survey_prompt_names
from experiments.execution.task_list_sql import seal_check_read, seal_check_store
from experiments.models import CohortTask, Protocol, Run, Slot, SurveySampleMember
from experiments.models.runs import Phase


@dataclass(frozen=True)
class KindRules:
    """One kind's behaviour: what the driver, the sealing and the pages ask of a protocol."""

    planners: Mapping[str, Callable[[Run], None]]  # phase → the planner of its slots
    judging_in_parts: bool  # a large judging phase is planned and handed out part by part (`driver`)
    first_phase: str  # where a started run begins
    sending_roles: tuple[str, ...]  # the model settings whose endpoints a run calls
    summary: Callable[[Run], dict]  # the analysis phase's headline, kept on the run
    robustness_tables: bool  # the tables page is computed once the run is done
    prompt_names: Callable[[Protocol], list[str]]  # the prompt files a seal hashes
    task_list_sha256: Callable[[object], str]  # the cohort's list, as a seal hashes it
    seals_source: bool  # the seal binds the run it re-grades and that run's answers
    dashboard: str  # the run's dashboard page (URL name)
    respondents: str | None  # the page a run's task pages give way to (URL name), or None


# --- seal rules ---------------------------------------------------------------------------------

def interview_prompt_names(protocol: Protocol) -> list[str]:
    names = set(JUDGE_PROMPTS)
    for key in protocol.conditions:
        try:
            names.update(get_condition(key).prompt_names())
        except KeyError:
            continue  # protocol_problems names it
    return sorted(names)


def regrade_prompt_names(protocol: Protocol) -> list[str]:
    return sorted(JUDGE_PROMPTS)  # nothing is generated: a changed answer prompt does not concern it


def pairwise_prompt_names(protocol: Protocol) -> list[str]:
    return sorted(PAIRWISE_JUDGE_PROMPTS)  # its judge's only: nothing is generated, nothing graded 0-3


_TASK_FIELDS = ("task__session__external_id", "task__session__person__label", "task__session__study__key",
                "task__position", "task__question_turn__index", "task__answer_turn__index", "task__cut",
                "task__record_cut")
_TEXT_FIELDS = ("task__question_turn__text", "task__answer_turn__text")


class _TextSha256(Func):
    """The hex sha256 of a text's UTF-8 bytes, computed by PostgreSQL (as `sha256_text`)."""

    template = "ENCODE(SHA256(CONVERT_TO(%(expressions)s, 'UTF8')), 'hex')"
    output_field = CharField()


def cohort_task_list_sha256(cohort) -> str:
    """The sha256 of the cohort's `canonical_task_list`, from one plain query.

    The driver checks the seal before each phase, between the last answer of one phase and the
    first request of the next, under the run's lock: building five model instances per task
    cost most of that time on large cohorts, and so did moving every question and answer text
    to this process only to hash it. The database hashes the texts (the same
    sha256 of the same UTF-8 bytes) and only the hashes cross the wire."""
    rows = CohortTask.objects.filter(cohort=cohort).order_by("position")
    hashed = rows.annotate(**{f"sha_{i}": _TextSha256(name) for i, name in enumerate(_TEXT_FIELDS)})
    lines = hashed.values_list(*_TASK_FIELDS, "sha_0", "sha_1")
    return sha256_text(canonical_task_lines(lines))


def checked_sha256(what: str, subject_id: int, project_id: int, compute: Callable[[], str], *,
                   inputs_sha256: str = "", memories: bool = False) -> str:
    """`compute()`, read as last computed while nothing it reads has changed since: a seal check at a
    phase boundary costs one row, whatever the cohort's size (`task_list_sql`). The project's "tasks"
    epoch covers every cohort entry, task, session, person, study, turn, sample member and respondent
    of the project; with `memories`, its "memories" epoch too. `inputs_sha256` names what else no epoch
    covers (prompt files, settings); the code version is stored with every hash, since the code decides
    what is hashed and how (`canonical_task_lines`, `canonical_hashed_list`, the queries here): a hash
    stored with other inputs, or by other code (before a deploy), is computed again."""
    now = seal_check_read(project_id, what, subject_id)
    epochs = (now.tasks_epoch, now.memories_epoch if memories else 0)
    inputs = sha256_text(canonical_json({"code": code_version(), "inputs": inputs_sha256}))
    if now.stored is not None and now.stored[:3] == (*epochs, inputs):
        return now.stored[3]
    sha256 = compute()
    seal_check_store(what, subject_id, *epochs, inputs, sha256)
    return sha256


def cohort_task_list_sha256_checked(cohort) -> str:
    """`cohort_task_list_sha256`, the same hash, computed again only when the project's epoch moved."""
    return checked_sha256("task list", cohort.pk, cohort.project_id, lambda: cohort_task_list_sha256(cohort))


def sample_list_sha256_hashed_there(cohort) -> str:
    """`survey_list_sha256` (a survey sample's respondents), the same hash from one plain query: the
    database hashes each persona and wave-4 block and only the hashes cross the wire. (Loading the
    respondents whole, as sealing does, took 17 GB at 100,000 respondents of the bundled sample's size.)"""
    rows = SurveySampleMember.objects.filter(cohort=cohort).order_by("position").annotate(
        persona=_TextSha256("respondent__persona_text"), wave4=_TextSha256("respondent__wave4_json"))
    return sha256_text(canonical_hashed_list(rows.values_list("respondent__pid", "persona", "wave4")))


def survey_list_sha256_checked(cohort) -> str:
    """`survey_list_sha256`, the same hash, computed again (in the database) only when the project's epoch moved."""
    return checked_sha256("survey list", cohort.pk, cohort.project_id, lambda: sample_list_sha256_hashed_there(cohort))


# --- analysis -----------------------------------------------------------------------------------

def interview_summary(run: Run) -> dict:
    return run_summary(dashboard_refresh(run).payload, run.protocol.criteria)


def regrade_summary(run: Run) -> dict:
    # Computed once here, like the contrasts: both runs' grades are final by now.
    return {**interview_summary(run), "judges": judge_comparison(run)}


# --- the table ----------------------------------------------------------------------------------

BOTH_ROLES = (Slot.Role.GENERATOR, Slot.Role.JUDGE)

KINDS: dict[str, KindRules] = {
    Protocol.Kind.INTERVIEW: KindRules(
        planners=PLANNERS, judging_in_parts=True, first_phase=Phase.MEMORIES, sending_roles=BOTH_ROLES,
        summary=interview_summary, robustness_tables=True, prompt_names=interview_prompt_names,
        task_list_sha256=cohort_task_list_sha256_checked, seals_source=False, dashboard="run_dashboard", respondents=None,
    ),
    # scored against the recorded options (`analysis.survey_results`): no decisions, no judge, no tables
    Protocol.Kind.SURVEY: KindRules(
        planners=SURVEY_PLANNERS, judging_in_parts=False, first_phase=Phase.MEMORIES, sending_roles=BOTH_ROLES,
        summary=survey_summary, robustness_tables=False, prompt_names=survey_prompt_names,
        task_list_sha256=survey_list_sha256_checked, seals_source=False, dashboard="survey_dashboard",
        respondents="survey_respondents",
    ),
    # judges a finished run's answers again, generating nothing (`execution.regrade`)
    Protocol.Kind.REGRADE: KindRules(
        planners=dict.fromkeys(PLANNERS, plan_regrade), judging_in_parts=False, first_phase=Phase.JUDGING,
        sending_roles=(Slot.Role.JUDGE,), summary=regrade_summary, robustness_tables=True,
        prompt_names=regrade_prompt_names, task_list_sha256=cohort_task_list_sha256_checked, seals_source=True,
        dashboard="run_dashboard", respondents=None,
    ),
    # compares a finished run's answers two by two, both orders (`execution.pairwise_judge`)
    Protocol.Kind.PAIRWISE: KindRules(
        planners=dict.fromkeys(PLANNERS, plan_pairwise_judging), judging_in_parts=False, first_phase=Phase.JUDGING,
        sending_roles=(Slot.Role.JUDGE,), summary=pairwise_summary, robustness_tables=False,
        prompt_names=pairwise_prompt_names, task_list_sha256=cohort_task_list_sha256_checked, seals_source=True,
        dashboard="pairwise_judge_dashboard", respondents=None,
    ),
}


def kind_rules(protocol: Protocol) -> KindRules:
    return KINDS[protocol.kind]
