"""Survey studies as data (issue 16): importing validated respondents whole or not at all, the
seeded samples as cohorts, and rebuilding a stored respondent for the core.

The core (`experiments.core.survey`) reads and validates the files and checks leaks; this module
stores what it returns: respondents who passed, their target items (with the recorded wave-4 and
the waves 1-3 options), and every exclusion with its reason. A respondent's blocks are stored as
JSON of the core's own records, so a run rebuilds exactly the `Respondent` that was validated."""
from __future__ import annotations

import json
from dataclasses import dataclass

from django.db import transaction

from experiments.core.canonical import canonical_json, sha256_text
from experiments.core.survey.leaks import split_leaks
from experiments.core.survey.records import Block, Question, Respondent, SurveyImportError, SurveyProblem
from experiments.core.survey.screener import ScreenerError, screener_text
from experiments.core.survey.targets import DEVELOPMENT_SIZE, REPORTED_SIZE, respondent_samples, target_items
from experiments.core.survey.scores import SURVEY_SEED
from experiments.models import (
    Cohort, Project, SurveyExclusion, SurveyItem, SurveyRespondent, SurveySampleMember, SurveyStudy,
)

SAMPLE_NAMES = ("development", "reported")


@dataclass(frozen=True)
class SurveyImportResult:
    study: SurveyStudy
    imported: int
    excluded: list[str]  # one sentence per violation, naming respondent and question
    samples: list[Cohort]
    excluded_respondents: int


# --- blocks as JSON and back ----------------------------------------------------------------------

def blocks_json(blocks: tuple[Block, ...]) -> str:
    return json.dumps([[b.index, b.name, b.raw_name, [list(q) for q in b.questions]] for b in blocks],
                      ensure_ascii=False)


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

def _screener_problems(respondents: list[Respondent]) -> list[SurveyProblem]:
    problems = []
    for respondent in respondents:
        try:
            screener_text(respondent)
        except ScreenerError as error:
            problems.append(SurveyProblem(respondent.location.split(" ")[0], "", respondent.pid, "screener", str(error)))
    return problems


def sample_sizes(n: int) -> tuple[int, int]:
    """The paper's 200 + 400 when there are enough respondents; else a third and the rest."""
    if n >= DEVELOPMENT_SIZE + REPORTED_SIZE:
        return DEVELOPMENT_SIZE, REPORTED_SIZE
    development = max(1, n // 3)
    return development, n - development


def survey_import(*, project: Project, name: str, respondents: list[Respondent], sources: list[str],
                  synthetic: bool = False, user=None, seed: int = SURVEY_SEED,
                  sizes: tuple[int, int] | None = None) -> SurveyImportResult:
    """Store a study's respondents, exclusions and seeded samples in one transaction.

    Raises SurveyImportError (nothing stored) for a name in use, a respondent without a usable
    screener, too few respondents for the samples asked, or nothing left after the leak check."""
    if not name or len(name) > 80:
        raise SurveyImportError([SurveyProblem(", ".join(sources), "", "", "", "the study needs a name of 1-80 characters")])
    if SurveyStudy.objects.filter(project=project, name=name).exists():
        raise SurveyImportError([SurveyProblem(", ".join(sources), "", "", "",
                                               f"a survey study named {name!r} exists in this project already")])
    problems = _screener_problems(respondents)
    if problems:
        raise SurveyImportError(problems)
    clean, violations = split_leaks(respondents)
    if not clean:
        raise SurveyImportError([SurveyProblem(", ".join(sources), "", "", "",
                                               "no respondent is left after the leak check")])
    sizes = sizes or sample_sizes(len(clean))
    try:
        samples = respondent_samples([r.pid for r in clean], seed=seed, sizes=sizes)
    except ValueError as error:
        raise SurveyImportError([SurveyProblem(", ".join(sources), "", "", "", str(error))]) from None
    with transaction.atomic():
        study = SurveyStudy.objects.create(project=project, name=name, source_files=list(sources),
                                           synthetic=synthetic, rows_read=len(respondents), imported_by=user)
        SurveyRespondent.objects.bulk_create([
            SurveyRespondent(study=study, pid=r.pid, persona_text=r.persona_text, persona_json=blocks_json(r.persona),
                             earlier_json=blocks_json(r.earlier), wave4_json=blocks_json(r.wave4),
                             location=r.location[:255])
            for r in clean
        ])
        by_pid = {row.pid: row for row in SurveyRespondent.objects.filter(study=study)}
        SurveyItem.objects.bulk_create([
            SurveyItem(respondent=by_pid[r.pid], number=i.number, key=i.key, qid=i.qid, row_id=i.row_id,
                       block=i.block, question=i.question, row=i.row, options=list(i.options), kind=i.kind,
                       wave4=i.wave4, earlier=i.earlier)
            for r in clean for i in target_items(r)
        ], batch_size=5000)
        SurveyExclusion.objects.bulk_create([
            SurveyExclusion(study=study, pid=v.pid, kind=v.kind, detail=v.detail) for v in violations
        ])
        cohorts = [_sample_cohort(project, study, label, pids, by_pid, seed, user, sizes)
                   for label, pids in zip(SAMPLE_NAMES, samples)]
    return SurveyImportResult(study, len(clean), [str(v) for v in violations], cohorts,
                              len({v.pid for v in violations}))


def canonical_respondent_list(respondents: list[SurveyRespondent]) -> str:
    """What a survey sample is hashed by: one JSON line per respondent, text through its sha256."""
    return "".join(canonical_json({"pid": r.pid, "persona_sha256": sha256_text(r.persona_text),
                                   "wave4_sha256": sha256_text(r.wave4_json)}) + "\n" for r in respondents)


def _sample_cohort(project, study, label, pids, by_pid, seed, user, sizes) -> Cohort:
    members = [by_pid[pid] for pid in pids]
    cohort = Cohort.objects.create(
        project=project, task_set=None, name=f"{study.name} {label}", seed=seed, requested_size=len(pids),
        rule={"kind": "survey sample", "study": study.name, "sample": label, "sizes": list(sizes),
              "order": "core.survey.targets.seeded_order", "synthetic": study.synthetic},
        task_list_sha256=sha256_text(canonical_respondent_list(members)), created_by=user,
    )
    SurveySampleMember.objects.bulk_create([SurveySampleMember(cohort=cohort, respondent=r, position=i)
                                            for i, r in enumerate(members)])
    return cohort


# --- reading back --------------------------------------------------------------------------------

def is_survey_cohort(cohort: Cohort) -> bool:
    return cohort.task_set_id is None


def sample_respondents(cohort: Cohort) -> list[SurveyRespondent]:
    return [m.respondent for m in SurveySampleMember.objects.filter(cohort=cohort)
            .select_related("respondent__study").order_by("position")]


def sample_study(cohort: Cohort) -> SurveyStudy | None:
    member = SurveySampleMember.objects.filter(cohort=cohort).select_related("respondent__study").first()
    return member.respondent.study if member else None


def respondent_items(respondent_ids) -> dict[int, list[SurveyItem]]:
    items: dict[int, list[SurveyItem]] = {}
    for item in SurveyItem.objects.filter(respondent_id__in=list(respondent_ids)).order_by("respondent_id", "number"):
        items.setdefault(item.respondent_id, []).append(item)
    return items
