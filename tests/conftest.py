"""Shared fixtures: the cast of roles and small hand-built interviews."""
import dataclasses
import uuid
from contextlib import contextmanager

import pytest
from django.contrib.auth import get_user_model

from experiments.core.conditions import CONDITIONS, get_condition
from experiments.core.interviews.records import ParsedSession, ParsedTurn
from experiments.models import Membership, Project, Role
from experiments.data.sessions import sessions_import

ROLES = [Role.OWNER, Role.ANALYST, Role.RATER, Role.VIEWER]

UNRUNNABLE = "stub-system(B=|memory|)"


@pytest.fixture
def unrunnable_condition(monkeypatch):
    """A registered condition marked not runnable, for the guards of forms, commands and seals:
    every real condition runs today, but a team may register a stub before its code."""
    stub = dataclasses.replace(get_condition("mem0(B=|memory|)"), key=UNRUNNABLE, evidence="stub-system",
                               runnable=False, note="NOT YET RUNNABLE: a stub registered by the tests")
    monkeypatch.setitem(CONDITIONS, UNRUNNABLE, stub)
    return UNRUNNABLE


@pytest.fixture
def server():
    """The tests' local LLM server (tests/llm_fake_server.py): real HTTP on 127.0.0.1."""
    from tests.llm_fake_server import running_fake_llm
    with running_fake_llm() as fake:
        yield fake


@contextmanager
def private_rq_queue(prefix: str):
    """An rq queue of the calling test's own on the real Redis, so no other test's jobs run in it
    and its jobs run nowhere else; deleted afterwards."""
    import django_rq
    import redis
    from rq import Queue
    connection = django_rq.get_connection("default")
    try:
        connection.ping()
    except redis.exceptions.ConnectionError:
        pytest.fail("Redis must be reachable for this test (REDIS_URL)")
    queue = Queue(f"{prefix}-{uuid.uuid4().hex}", connection=connection)
    try:
        yield queue
    finally:
        queue.delete(delete_jobs=True)


@pytest.fixture
def scratch_database_url():
    """The DATABASE_URL of an empty database of its own on the tests' server (for a fresh
    interpreter that migrates from nothing), dropped afterwards."""
    import psycopg
    from psycopg import sql
    from django.db import connection
    from ownwords_site.env import database_url
    name = f"scratch_{uuid.uuid4().hex[:16]}"
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params["dbname"] = "postgres"
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield database_url({**connection.settings_dict, "NAME": name})
    finally:
        with psycopg.connect(**params, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def http():
    """One httpx client per module (each new client builds an SSL context); no proxy from the environment."""
    import httpx
    with httpx.Client(trust_env=False) as client:
        yield client


@pytest.fixture
def cohort1(project):
    """A cohort of one session with one task, for the engine's tests."""
    from tests.engine_helpers import build_cohort
    return build_cohort(project, sessions=1, targets=1)


@pytest.fixture
def cohort2(project):
    """A cohort of one session with two tasks."""
    from tests.engine_helpers import build_cohort
    return build_cohort(project, sessions=1, targets=2)


@pytest.fixture
def project(db):
    return Project.objects.create(slug="alpha", name="Alpha study")


@pytest.fixture
def cast(project):
    """One user per role in `project`, plus an outsider who belongs to another project."""
    User = get_user_model()
    users = {}
    for role in ROLES:
        user = User.objects.create_user(username=f"{role}-user", password="pw-for-tests-only")
        Membership.objects.create(project=project, user=user, role=role)
        users[role.value] = user
    other = Project.objects.create(slug="other", name="Other")
    outsider = User.objects.create_user(username="outsider", password="pw-for-tests-only")
    Membership.objects.create(project=other, user=outsider, role=Role.OWNER)
    users["outsider"] = outsider
    return users


@pytest.fixture
def loopback_grants(cast):
    """The administrator's grant of the tests' loopback endpoint (a paid one) to every member of the
    cast: for the tests of roles and runs on top of it (tests/test_endpoint_grants.py: without one)."""
    from experiments.models import EndpointGrant
    for user in cast.values():
        EndpointGrant.objects.create(endpoint="test-loopback", user=user)


@pytest.fixture
def owner_client(client, cast):
    """The test client logged in as the project's owner."""
    client.force_login(cast["owner"])
    return client


def qa_turns(n_pairs, *, answer="I would say it depends on the day really", question="Could you tell me more about that part?"):
    """An interview of `n_pairs` substantive question/answer pairs."""
    turns = []
    for i in range(n_pairs):
        turns.append(ParsedTurn("interviewer", f"{question} ({i})"))
        turns.append(ParsedTurn("participant", f"{answer} number {i}."))
    return tuple(turns)


def parsed_session(session_id, turns, *, person=None, study="s1", screener=()):
    return ParsedSession(
        session_id=session_id,
        person_id=person or f"p-{session_id}",
        study_id=study,
        language="en",
        screener=tuple(screener),
        turns=tuple(turns),
        location="line 1",
    )


@pytest.fixture
def imported(project):
    """Two eligible sessions (paper rule) and one too short, in two studies."""
    sessions = [
        parsed_session("sess-a", qa_turns(12), study="s1", screener=[("Age?", "41"), ("Job?", "Composer")]),
        parsed_session("sess-b", qa_turns(14), study="s2"),
        parsed_session("sess-c", qa_turns(5), study="s2"),
    ]
    sessions_import(project=project, parsed=sessions, source_format="jsonl", source_file="hand.jsonl")
    return project


@pytest.fixture
def rated_run(cast, project):
    """A finished offline run of `project` (which has the role cast) and three extra raters."""
    from tests.annotations_helpers import add_raters, finished_run
    run = finished_run(project)
    add_raters(project)
    return run


@pytest.fixture
def campaign(rated_run, cast):
    """A campaign over every condition of `rated_run`, rated by rater-a and rater-b (k = 2)."""
    from annotations.campaigns import campaign_create
    from tests.annotations_helpers import CONDITIONS, RATERS
    return campaign_create(run=rated_run, name="first", conditions=CONDITIONS, raters=RATERS[:2],
                           user=cast["owner"], seed=11)
