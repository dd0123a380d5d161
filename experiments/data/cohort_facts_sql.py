"""The SQL of the explorer's facts on a cohort's tasks (`cohort_facts`): one UPDATE, one EXISTS."""
from __future__ import annotations

from django.db import connection

from experiments.models import CohortTask, Person, Session, Study, Task, Turn

_CT = CohortTask._meta.db_table

# Index: the cohort's tasks by the unique (cohort, task) constraint (cohort_task_once), then each
# task, session, person, study and turn by its primary key.
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


def facts_missing(cohort_param: str = "%s") -> str:
    """SQL that is true while a cohort's tasks lack their facts (the cohort id as `cohort_param`)."""
    # Index: the partial cohort_task_facts_missing (cohort) WHERE person_rank IS NULL, empty once
    # every fact is there.
    return f"EXISTS (SELECT 1 FROM {_CT} WHERE cohort_id = {cohort_param} AND person_rank IS NULL)"


def copy_facts(cohort_id: int) -> None:
    """Copy the explorer's facts onto the cohort's tasks (one UPDATE)."""
    with connection.cursor() as cursor:
        cursor.execute(_FILL.format(ct=_CT, task=Task._meta.db_table, session=Session._meta.db_table,
                                    person=Person._meta.db_table, study=Study._meta.db_table,
                                    turn=Turn._meta.db_table), [cohort_id])
