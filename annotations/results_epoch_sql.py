"""The SQL of the results' epochs (migrations 0008-0014): whether a campaign's stored numbers are current,
read in one query: counters, and a digest of the campaign's ratings.

A campaign's counter moves with every statement that changes what its results read (its
assignments, items, raters, adjudications and settings; its run's predictions, grades and protocol;
the finished pairwise-judge runs over its run, their settled slots and replies); the project's
"tasks" counter (migration 0032) moves with its tasks, sessions, people and cohorts. The triggers move them in the
writer's transaction, so a reader sees a new epoch exactly when it sees the change. Numbers are
stored with the epochs read before their inputs: a change committed while they were computed moves
an epoch past them, and the next view computes them again. Ratings move no counter (0011): the
counter row's lock, held to the end of the rater's transaction, made raters of one campaign wait on
each other; their count and an order-free hash sum are read with the counters instead (a few
milliseconds at 20,000 ratings, waiting on no writer). The engine's answers and grades find by a row
trigger whether any campaign reads their run and note only those campaigns, and the statement's one
trigger moves the noted counters (0012-0013): a run no campaign reads costs one index probe per row,
not a transition table per statement; a reservation fires no function at all, nor does a judge's
receipt (0014: a call and slot in flight belong to a run not finished).
"""
from __future__ import annotations

import json
from typing import NamedTuple

from django.db import connection


class ResultsState(NamedTuple):
    epochs: dict  # {"campaign": n, "tasks": n, "ratings": [count, digest]} now (0 while nothing moved a counter)
    stored_epochs: dict | None  # what the stored numbers were computed at, None: none stored, or marked to compute again
    inputs_sha256: str | None  # the stored numbers' inputs, None: none stored
    payload: dict | None  # the stored numbers

    def current(self, version: str) -> dict:
        """The epochs numbers computed now are to be stored with (the code's `version` among them)."""
        return {**self.epochs, "version": version}


def _json(value):
    """A jsonb column as psycopg hands it to a plain cursor (text under Django's adapters)."""
    return json.loads(value) if isinstance(value, (str, bytes)) else value


# A rating's columns that enter the numbers (migration 0011: ratings move no counter, whose row lock
# made raters of a campaign wait on each other; their digest is read here instead).
RATING_COLUMNS = "id, assignment_id, grade, flagged, seconds_spent, preference, same_content"


def results_state(campaign_id: int) -> ResultsState:
    """The campaign's epochs now (its counter, the project's tasks epoch and its ratings' digest)
    and its stored numbers, if any: one query."""
    # Index: the primary keys of the campaign, epoch and project epoch tables, the stored result's
    # unique campaign_id (one row each), and human_grade_latest (campaign first) for the ratings.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(e.epoch, 0), COALESCE(t.epoch, 0), r.epochs, r.inputs_sha256, r.payload, g.n, g.digest "
            "FROM annotations_ratingcampaign c "
            # the ratings' count and digest in one pass over them
            "CROSS JOIN LATERAL (SELECT count(*) AS n, "
            f"COALESCE(sum(hashtextextended(concat_ws('|', {RATING_COLUMNS}), 0)), 0)::text AS digest "
            "FROM annotations_humangrade WHERE campaign_id = c.id) g "
            "LEFT JOIN annotations_results_epoch e ON e.campaign_id = c.id "
            "LEFT JOIN experiments_project_epoch t ON t.project_id = c.project_id AND t.what = 'tasks' "
            "LEFT JOIN annotations_campaignresult r ON r.campaign_id = c.id "
            "WHERE c.id = %s", [campaign_id])
        row = cursor.fetchone()
    if row is None:
        return ResultsState({"campaign": 0, "tasks": 0, "ratings": [0, "0"]}, None, None, None)
    campaign, tasks, stored, sha, payload, ratings, digest = row
    return ResultsState({"campaign": campaign, "tasks": tasks, "ratings": [ratings, digest]}, _json(stored), sha,
                        _json(payload))


def results_epoch(campaign_id: int) -> int:
    """The campaign's results counter now (for tests and the benchmark)."""
    return results_state(campaign_id).epochs["campaign"]
