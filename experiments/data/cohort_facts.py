"""What the run explorer sorts and filters on, copied onto a cohort's tasks.

A sort by person or study and the question-text filter used to join every task of the cohort to
its session, person or study and question turn (71,430 lookups at a million predictions). A
cohort never changes, nor do its people's labels, studies' keys or turns, so `cohort_facts_copy`
writes once, for each of its tasks (`CohortTask`):

- `person_rank` and `study_rank`: the rank (1, 2, … with ties equal) of the person's label and of
  the study's key among the cohort's, in code point order (COLLATE "C"), so ORDER BY rank, position is ORDER BY label, position;
- `question_lowercase`: the question's text as the database's LOWER() gives it, which the filter
  matched before.

`data.cohort_draw` copies them as it stores a cohort and migration 0017 for the cohorts before it;
the explorer copies them for a cohort stored otherwise (a script's INSERT) when it finds them
missing (`cohort_facts_missing`, an EXISTS on an index that is empty once they are all there).
"""
from __future__ import annotations

from experiments.data.cohort_facts_sql import copy_facts, facts_missing


def cohort_facts_missing(cohort_param: str = "%s") -> str:
    """SQL that is true while a cohort's tasks lack their facts (the cohort id as `cohort_param`)."""
    return facts_missing(cohort_param)


def cohort_facts_copy(cohort_id: int) -> None:
    """Copy the explorer's facts onto the cohort's tasks (one UPDATE)."""
    copy_facts(cohort_id)
