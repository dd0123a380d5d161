"""Shared fixtures of the rating tests: a finished offline run with several people and raters.

The run goes through the real engine (run_inline) with the offline stand-in, so items,
predictions and judge grades are what a real run stores.
"""
from __future__ import annotations

from django.contrib.auth import get_user_model

from experiments.data.sessions import cohort_draw, sessions_import
from experiments.execution.control import run_start
from experiments.execution.driver import run_inline
from experiments.execution.sealing import protocol_seal
from experiments.models import Membership, Protocol, Role, Run
from tests.conftest import parsed_session, qa_turns

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
MEMORY = "memory(concrete,100w)+one-shot"
OWNWORDS = "ownwords(B=|memory|)"
QUESTION_ONLY = "question-only"
CONDITIONS = [MEMORY, OWNWORDS, QUESTION_ONLY]
RATERS = ["rater-a", "rater-b", "rater-c"]


def finished_run(project, *, people: int = 4, conditions=CONDITIONS) -> Run:
    parsed = [
        parsed_session(f"rate-{i}", qa_turns(12, answer=f"Person {i} keeps bees and talks about the hive",
                                             question=f"Tell me about the part {i} of your week?"),
                       person=f"person-{i}", study=f"s{i % 2}")
        for i in range(people)
    ]
    sessions_import(project=project, parsed=parsed, source_format="jsonl", source_file="rate.jsonl")
    cohort = cohort_draw(project=project, name="rate", size=people, seed=3)
    protocol = Protocol.objects.create(
        project=project, name="bees-protocol", cohort=cohort, conditions=list(conditions), generator=OFFLINE, judge=OFFLINE,
        contrasts=[{"name": "OwnWords minus memory", "terms": {OWNWORDS: 1, MEMORY: -1}, "family": True}],
        bootstrap={"seed": 7, "draws": 300},
    )
    run = Run.objects.create(protocol=protocol_seal(protocol=protocol, user=None))
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED
    return run


def add_raters(project, names=RATERS):
    User = get_user_model()
    users = []
    for name in names:
        user = User.objects.create_user(username=name, password="pw-for-tests-only")
        Membership.objects.create(project=project, user=user, role=Role.RATER)
        users.append(user)
    return users
