"""What each cohort of a project drew, for the cohort map (the paper's Fig. 5); the counting is
`core.cohort_map`'s. Interview cohorts draw sessions (and so their people) through their tasks; a
survey sample draws respondents, counted as people with no session.

`project_draws` keys people and sessions by id, so the counts never depend on labels;
`project_draw_labels` gives the labels, for readers allowed to see participant data.
"""
from __future__ import annotations

from experiments.models import Cohort, CohortTask, SurveySampleMember


def _cohorts(project) -> dict[int, str]:
    """Cohort id → name, in the order they were drawn."""
    return dict(Cohort.objects.filter(project=project).order_by("pk").values_list("pk", "name"))


def project_draws(project, *, labels: bool = False) -> dict[str, list[tuple]]:
    """Cohort name → its distinct (person, session) pairs: ids, or labels when ``labels``
    (a respondent is ("respondent", id) or "<study>/<pid>", its session None)."""
    names = _cohorts(project)
    draws: dict[str, set] = {name: set() for name in names.values()}
    fields = (("task__session__person__label", "task__session__external_id") if labels
              else ("task__session__person_id", "task__session_id"))
    for cohort_id, person, session in (CohortTask.objects.filter(cohort__project=project)
                                       .values_list("cohort_id", *fields).distinct().iterator(chunk_size=10_000)):
        draws[names[cohort_id]].add((person, session))
    respondents = (("respondent__study__name", "respondent__pid") if labels else ("respondent_id", "respondent_id"))
    for cohort_id, first, second in (SurveySampleMember.objects.filter(cohort__project=project)
                                     .values_list("cohort_id", *respondents).iterator(chunk_size=10_000)):
        draws[names[cohort_id]].add((f"{first}/{second}" if labels else ("respondent", first), None))
    return {name: sorted(pairs, key=str) for name, pairs in draws.items()}
