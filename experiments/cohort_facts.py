"""What the run explorer sorts and filters on, copied onto a cohort's tasks.

A sort by person or study and the question-text filter used to join every task of the cohort to
its session, person or study and question turn (71,430 lookups at a million predictions). A
cohort never changes, nor do its people's labels, studies' keys or turns, so `cohort_facts_copy`
writes once, for each of its tasks (`CohortTask`):

- `person_rank` and `study_rank`: the rank (1, 2, … with ties equal) of the person's label and of
  the study's key among the cohort's, in code point order (COLLATE "C" on PostgreSQL, SQLite's
  binary order), so ORDER BY rank, position is ORDER BY label, position;
- `question_lowercase`: the question's text as the database's LOWER() gives it, which the filter
  matched before.

`data.cohort_draw` copies them as it stores a cohort and migration 0017 for the cohorts before it;
the explorer copies them for a cohort stored otherwise (a script's INSERT) when it finds them
missing (`cohort_facts_missing`, an EXISTS on an index that is empty once they are all there).
"""
from __future__ import annotations

from django.db import connection

from experiments.models import CohortTask, Person, Session, Study, Task, Turn

_CT = CohortTask._meta.db_table

_FILL = """
UPDATE {ct} SET person_rank = facts.person_rank, study_rank = facts.study_rank,
                question_lowercase = facts.question_lowercase
FROM (SELECT ct.id AS id,
             DENSE_RANK() OVER (ORDER BY pe.label COLLATE "C") AS person_rank,
             DENSE_RANK() OVER (ORDER BY st.key COLLATE "C") AS study_rank,
             LOWER(qt.text) AS question_lowercase
      FROM {ct} ct JOIN {task} t ON t.id = ct.task_id JOIN {session} s ON s.id = t.session_id
      JOIN {person} pe ON pe.id = s.person_id JOIN {study} st ON st.id = s.study_id
      JOIN {turn} qt ON qt.id = t.question_turn_id
      WHERE ct.cohort_id = %s) facts
WHERE {ct}.id = facts.id
"""


def cohort_facts_missing(cohort_param: str = "%s") -> str:
    """SQL that is true while a cohort's tasks lack their facts (the cohort id as `cohort_param`)."""
    return f"EXISTS (SELECT 1 FROM {_CT} WHERE cohort_id = {cohort_param} AND person_rank IS NULL)"


def cohort_facts_copy(cohort_id: int) -> None:
    """Copy the explorer's facts onto the cohort's tasks (one UPDATE)."""
    with connection.cursor() as cursor:
        cursor.execute(_FILL.format(ct=_CT, task=Task._meta.db_table, session=Session._meta.db_table,
                                    person=Person._meta.db_table, study=Study._meta.db_table,
                                    turn=Turn._meta.db_table), [cohort_id])

