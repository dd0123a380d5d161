"""The MemGPT-style condition (paper App. H): archive-query parsing, the exact evidence, and a
whole run through the request journal against the tests' local OpenAI-compatible server."""

import pytest
from django.test import Client

from experiments.core import evidence as ev
from experiments.core.assembly import TaskInput, assemble, assemble_archive_queries
from experiments.core.conditions import MEMGPT_STYLE, get_condition
from experiments.core.estimate import CohortShape, estimate_run
from experiments.core.evidence import TurnText
from experiments.core.parsers import MAX_ARCHIVE_QUERY_CHARS, parse_archive_queries
from experiments.execution.driver import run_inline
from experiments.models import ModelCall, Prediction, Slot
from experiments.models.runs import Phase
from tests.engine_helpers import ONE_SHOT, Roles, Sleeps, build_cohort, make_run, openai_model, user_text

MEMGPT = "memgpt-style(B=|memory|)"
MEMORY_PLUS_OWNWORDS = "memory+ownwords"


# --- parsing: one to three strings in {"queries": [...]}, anything else recorded as a failure ----

@pytest.mark.parametrize("reply, queries", [
    ('{"queries": ["garden tools", "weekend"]}', ("garden tools", "weekend")),
    ('{"queries": ["one"], "note": "extra fields are ignored"}', ("one",)),
    ('```json\n{"queries": ["a", "b", "c"]}\n```', ("a", "b", "c")),
    ('  {"queries": ["  padded  "]}  ', ("padded",)),
])
def test_well_formed_queries_parse(reply, queries):
    parsed = parse_archive_queries(reply)
    assert parsed.usable and parsed.queries == queries and parsed.error is None
    assert parsed.joined() == " ".join(queries)


@pytest.mark.parametrize("reply, error", [
    ("", "empty"),
    ("gardening, weekends", "malformed-json"),
    ('Here you go: {"queries": ["x"]}', "malformed-json"),
    ('{"queries": ["x"]} {"queries": ["y"]}', "malformed-json"),
    ('["x", "y"]', "not-an-object"),
    ('{"query": ["x"]}', "missing-field"),
    ('{"queries": "x y"}', "wrong-type"),
    ('{"queries": []}', "no-queries"),
    ('{"queries": ["a", "b", "c", "d"]}', "too-many-queries"),
    ('{"queries": ["a", 2]}', "wrong-type"),
    ('{"queries": ["a", null]}', "wrong-type"),
    ('{"queries": [["nested"]]}', "wrong-type"),
    ('{"queries": ["a", "   "]}', "empty-query"),
    ('{"queries": ["a"], "queries": ["b"]}', "duplicate-key"),
    ('{"queries": ["a"], "n": NaN}', "non-finite-number"),
    ('{"queries": ["a"], "n": 1e999}', "non-finite-number"),
    ('{"queries": ["' + "w" * (MAX_ARCHIVE_QUERY_CHARS + 1) + '"]}', "query-too-long"),
    ("[" * 100_000, "malformed-json"),
])
def test_hostile_or_malformed_replies_are_failures_with_their_reason(reply, error):
    parsed = parse_archive_queries(reply)
    assert not parsed.usable and parsed.queries == () and parsed.error == error


# --- the evidence: OwnWords's own builder with the joined queries ------------------------------

TURNS = (
    TurnText(0, "interviewer", "What do you do for a living these days?"),
    TurnText(1, "participant", "I compose music for films. On weekends I garden. My tomatoes failed this year."),
    TurnText(2, "interviewer", "What else do you care about?"),
    TurnText(3, "participant", "My two dogs. I walk them by the river every morning before work."),
    TurnText(4, "interviewer", "How would you spend a free Saturday, do you think?"),
)
TASK = TaskInput(question="How would you spend a free Saturday, do you think?", turns=TURNS, cut=4, record_cut=4,
                 screener=(("Age?", "41"),))
MEMORY = "A film composer who gardens and has dogs."


def test_the_excerpts_are_ownwords_at_the_memorys_length_with_the_joined_queries_as_query():
    queries = ("garden tomatoes", "dogs river")
    sent = assemble(MEMGPT, TASK, memory=MEMORY, archive_queries=queries)
    expected = ev.ownwords(TASK.record(), "garden tomatoes dogs river", len(MEMORY))
    assert expected and expected != ev.ownwords(TASK.record(), TASK.question, len(MEMORY))
    assert sent.evidence == MEMORY + "\n\n" + expected
    assert sent.budget == len(MEMORY)
    assert f"[WHAT IS KNOWN ABOUT THIS PARTICIPANT]\n{MEMORY}\n" in sent.user
    assert f"[EXCERPTS FROM EARLIER IN THE INTERVIEW, verbatim]\n{expected}\n" in sent.user
    # memory + OwnWords differs only in who writes the query
    assert assemble(MEMORY_PLUS_OWNWORDS, TASK, memory=MEMORY).user == assemble(
        MEMGPT, TASK, memory=MEMORY, archive_queries=(TASK.question,)).user


def test_the_query_call_sees_screener_memory_and_question_only():
    sent = assemble_archive_queries(MEMGPT, TASK, memory=MEMORY)
    assert "Q: Age?\nA: 41" in sent.user and MEMORY in sent.user and TASK.question in sent.user
    assert "tomatoes" not in sent.user  # the verbatim source is searched, never shown to the query writer
    assert [ref.name for ref in sent.prompt_refs] == ["memgpt_query_system", "memgpt_query_user"]
    with pytest.raises(ValueError):
        assemble(MEMGPT, TASK, memory=MEMORY)  # no answer without queries


def test_the_condition_is_runnable_and_estimated_as_one_more_call_per_task():
    condition = get_condition(MEMGPT)
    assert condition.runnable and condition.evidence == MEMGPT_STYLE
    shape = CohortShape(sessions=2, tasks=6, record_chars=2000, question_chars=50, reference_chars=200)
    estimate = {p.phase: p.calls for p in estimate_run([condition], shape, generator_cap=100, judge_cap=100).phases}
    assert estimate == {"memories": 2, "generation": 6, "decisions": 6, "judging": 6}


# --- a whole run against the local server ----------------------------------------------------


def test_a_run_journals_every_call_and_records_unparsed_queries_without_redrawing(project, server, http):
    cohort = build_cohort(project, sessions=2, targets=2, name="memgpt")
    query_replies = iter(['{"queries": ["gardening", "session"]}', "not json at all",
                          '{"queries": ["part"]}', '{"queries": ["a","b","c","d"]}'])

    def answer(request):
        text = user_text(request)
        if "[CORE MEMORY]" in text:
            return next(query_replies)
        return "Alpha answer."

    roles = Roles(server, answer=answer)
    run = make_run(project, cohort, conditions=[MEMGPT, ONE_SHOT], generator=openai_model(server))
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    assert run.status == "finished", run.status_reason

    archive = Slot.objects.filter(run=run, key__startswith="archive|")
    assert archive.count() == 4 and set(archive.values_list("phase", flat=True)) == {Phase.GENERATION}
    # every query call went through the journal once: nothing redrawn, unparseable or not
    assert ModelCall.objects.filter(slot__in=archive).count() == 4
    finals = Prediction.objects.filter(run=run, condition=MEMGPT, label="final")
    statuses = sorted(finals.values_list("status", flat=True))
    assert statuses == ["ok", "ok", "unparsed_queries", "unparsed_queries"]
    answered = finals.filter(status="ok")
    assert all(p.slot.phase == Phase.DECISIONS for p in answered)
    assert all(p.score == 3 for p in answered)  # judged like any answer
    assert finals.filter(status="unparsed_queries", slot__isnull=True).count() == 2
    # the answering call's excerpts are OwnWords with the parsed, joined queries
    for prediction in answered:
        memory = run.memories.get(session=prediction.task.session).text
        call = ModelCall.objects.get(slot__key__startswith=f"archive|{prediction.task_id}|")
        joined = parse_archive_queries(call.text).joined()
        record = ev.respondent_record(
            [TurnText(t.index, t.speaker, t.text) for t in prediction.task.session.turns.order_by("index")],
            prediction.task.record_cut)
        excerpts = ev.ownwords(record, joined, len(memory))
        assert prediction.evidence == memory + "\n\n" + excerpts
        assert prediction.budget == len(memory)
    # calls: 2 memories, 4 query calls + 4 one-shot answers, 2 MemGPT answers, judge calls per distinct answer
    assert roles.kinds["memory"] == 2
    assert sum(1 for r in server.requests if "[CORE MEMORY]" in user_text(r)) == 4
    assert Slot.objects.filter(run=run, phase=Phase.DECISIONS).count() == 2


def test_the_task_page_shows_the_archive_queries_to_text_readers_only(project, server, http, cast):
    cohort = build_cohort(project, sessions=1, targets=1, name="memgpt-page")
    Roles(server, answer=lambda request: ('{"queries": ["gardening talk"]}' if "[CORE MEMORY]" in user_text(request)
                                          else "Alpha answer."))
    run = make_run(project, cohort, conditions=[MEMGPT], generator=openai_model(server))
    run = run_inline(run.pk, client=http, sleep=Sleeps())
    task = Prediction.objects.get(run=run, condition=MEMGPT).task
    browser = Client()
    browser.force_login(cast["analyst"])
    page = browser.get(f"/p/{project.slug}/runs/{run.pk}/predictions/{task.pk}/").content.decode()
    assert "archive queries (the MemGPT-style query call)" in page
    assert "{&quot;queries&quot;: [&quot;gardening talk&quot;]}" in page
    browser.force_login(cast["viewer"])
    assert browser.get(f"/p/{project.slug}/runs/{run.pk}/predictions/{task.pk}/").status_code == 403
