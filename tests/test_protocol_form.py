"""The protocol form: conditions grouped by family, contrasts chosen from lists, and the
expected calls and tokens shown before sealing — checked against a run's real slots and by hand."""
import pytest
from django.db.models import Count
from django.urls import reverse

from experiments.core import evidence as ev
from experiments.core.condition_families import condition_family, conditions_by_family
from experiments.core.conditions import CONDITIONS
from experiments.core.estimate import CohortShape, estimate_run
from experiments.data.sessions import cohort_draw, cohort_shape, cohort_tasks
from experiments.models import Protocol, Slot
from tests.test_pages_runs import MEMORY, OWNWORDS, finished_run, make_protocol, protocol_form_data

FUSION = "memory(concrete,100w)+fusion(3)"
SELECTION = "memory(concrete,100w)+selection(3)"
WEIGHTED = {"name": "ownwords vs memories", "terms": {OWNWORDS: 1, MEMORY: -0.5, FUSION: -0.5}, "family": False,
            "criterion": None}


@pytest.fixture
def world(imported, cast):
    return {"project": imported, "cohort": cohort_draw(project=imported, name="c1", size=2, seed=1), "users": cast}


def test_every_condition_has_one_family_and_the_families_read_as_the_paper_names_them():
    grouped = conditions_by_family()
    keys = [c.key for _, members in grouped for c in members]
    assert sorted(keys) == sorted(CONDITIONS)
    assert condition_family(CONDITIONS[SELECTION]) == "memory"
    assert condition_family(CONDITIONS[OWNWORDS]) == "excerpts"
    assert condition_family(CONDITIONS["ownwords(B=|memory(concrete,50w)|)"]) == "sweep"
    assert condition_family(CONDITIONS["mem0(B=|memory|)"]) == "systems"
    assert condition_family(CONDITIONS["question-only"]) == "baselines"


def test_the_form_groups_conditions_and_offers_contrasts_as_lists(client, world, unrunnable_condition):
    client.force_login(world["users"]["analyst"])
    body = client.get(reverse("protocol_create", args=["alpha"])).content.decode()
    memory_family = body[body.index('id="family-memory"'):body.index('id="family-excerpts"')]
    assert f'value="{SELECTION}"' in memory_family and f'value="{OWNWORDS}"' not in memory_family
    assert "<legend>The person&#x27;s own words at a budget</legend>" in body
    assert 'name="contrasts"' not in body and "<textarea" not in body.split('id="contrast-rows"')[1].split("</table>")[0]
    rows = body.split('id="contrast-rows"')[1].split("</table>")[0]
    assert rows.count('name="contrast-0-first"') == 1 and '<optgroup label="A written memory">' in rows
    assert unrunnable_condition not in rows  # not runnable: not offered
    assert 'memgpt-style(B=|memory|)' in rows and 'mem0(B=|memory|)' in rows
    assert 'aria-label="Second condition of contrast 3"' in rows
    assert 'id="estimate-missing"' in body  # nothing chosen yet


def test_a_pair_chosen_from_the_lists_is_stored_as_a_paired_difference(client, world):
    client.force_login(world["users"]["owner"])
    data = protocol_form_data(world["cohort"], conditions=[MEMORY, OWNWORDS, FUSION], contrasts=[
        {"first": OWNWORDS, "second": MEMORY, "family": "on"}, {},
        {"name": "fusion gain", "first": FUSION, "second": MEMORY, "criterion": "on"}])
    response = client.post(reverse("protocol_create", args=["alpha"]), data)
    assert response.status_code == 302
    assert Protocol.objects.get(name="p-new").contrasts == [
        {"name": f"{OWNWORDS} - {MEMORY}", "terms": {OWNWORDS: 1, MEMORY: -1}, "family": True, "criterion": None},
        {"name": "fusion gain", "terms": {FUSION: 1, MEMORY: -1}, "family": False,
         "criterion": "interval_above_zero"},
    ]


def test_a_contrast_of_another_shape_is_kept_or_dropped_never_retyped(client, world):
    draft = make_protocol(world["project"], world["cohort"], "draft", conditions=[MEMORY, OWNWORDS, FUSION],
                          contrasts=[WEIGHTED])
    client.force_login(world["users"]["owner"])
    url = reverse("protocol_edit", args=["alpha", draft.pk])
    body = client.get(url).content.decode()
    line = f"ownwords vs memories: {OWNWORDS} - 0.5*{MEMORY} - 0.5*{FUSION}"
    assert f'value="{line}"' in body and "checked" in body.split(f'value="{line}"')[1][:40]
    base = protocol_form_data(world["cohort"], name="draft", conditions=[MEMORY, OWNWORDS, FUSION], contrasts=[])
    client.post(url, {**base, "kept_contrasts": [line]})
    draft.refresh_from_db()
    assert draft.contrasts == [WEIGHTED]
    response = client.post(url, {**base, "kept_contrasts": [line + " [family]"]})  # not one that was offered
    assert "Select a valid choice" in response.content.decode()
    draft.refresh_from_db()
    assert draft.contrasts == [WEIGHTED]
    client.post(url, base)  # box cleared
    draft.refresh_from_db()
    assert draft.contrasts == []


# --- the estimate -----------------------------------------------------------------------------

def test_the_estimate_by_hand():
    ten = lambda name: "x" * 10  # noqa: E731 — every prompt file 10 characters
    shape = CohortShape(sessions=2, tasks=4, record_chars=500, question_chars=30, reference_chars=50,
                        screener_chars=40)
    only = estimate_run([CONDITIONS["question-only"]], shape, generator_cap=100, judge_cap=20, prompt_text=ten)
    calls = {p.phase: p.calls for p in only.phases}
    assert calls == {"memories": 0, "generation": 4, "decisions": 0, "judging": 4}
    generation, judging = only.phases[1], only.phases[3]
    assert generation.input_tokens == 4 * (10 + 10 + 30) / 4  # system, user, question; no screener
    assert judging.input_tokens == 4 * (10 + 10 + 30 + 50 + 50) / 4  # + reference + an answer as long
    assert (generation.output_cap_tokens, judging.output_cap_tokens) == (400, 80)
    # A memory shown one-shot, by fusion and by selection shares its three candidates; OwnWords adds one.
    pool = estimate_run([CONDITIONS[k] for k in (MEMORY, FUSION, SELECTION, OWNWORDS)], shape, generator_cap=100,
                        judge_cap=20, prompt_text=ten)
    assert {p.phase: p.calls for p in pool.phases} == {"memories": 2, "generation": 16, "decisions": 8,
                                                       "judging": 20}
    # OwnWords at B = |memory|: 100 words of 6 characters, below the 500-character record.
    ownwords = estimate_run([CONDITIONS[OWNWORDS]], shape, generator_cap=100, judge_cap=20, prompt_text=ten)
    assert ownwords.phases[0].input_tokens == 2 * (10 + 10 + 500) / 4  # the memory it takes its budget from
    assert ownwords.phases[1].input_tokens == 4 * (10 + 10 + 500 + 30 + 40) / 4  # B = min(600, 500), question, screener


def test_the_cohort_shape_matches_the_texts(world):
    cohort = world["cohort"]
    tasks = cohort_tasks(cohort)
    shape = cohort_shape(cohort)
    sessions = {t.session_id: t for t in tasks}
    assert (shape.sessions, shape.tasks) == (len(sessions), len(tasks))
    records = [len("\n".join("- " + turn.text for turn in t.session.turns.filter(speaker="participant", index__lt=min(
        u.record_cut for u in tasks if u.session_id == sid)))) for sid, t in sessions.items()]
    # The query counts a line break after every line (one more per session than the join).
    assert shape.record_chars == pytest.approx(sum(r + 1 for r in records) / len(records))
    dialogue = [sum(len(turn.text) for turn in t.session.turns.filter(index__lt=t.cut)) for t in tasks]
    assert shape.dialogue_chars == pytest.approx(sum(dialogue) / len(dialogue))
    assert shape.question_chars == pytest.approx(sum(len(t.question_turn.text) for t in tasks) / len(tasks))
    assert shape.reference_chars == pytest.approx(sum(len(t.answer_turn.text) for t in tasks) / len(tasks))
    screeners = [sum(len(i.question) + len(i.answer) for i in s.session.screener_items.all()) for s in sessions.values()]
    assert shape.screener_chars == pytest.approx(sum(screeners) / len(screeners))
    assert shape.record_chars < ev.RECORD_CAP


def test_the_expected_calls_are_the_calls_a_run_plans(world):
    conditions = [MEMORY, FUSION, SELECTION, OWNWORDS, "question-only"]
    protocol = make_protocol(world["project"], world["cohort"], "counted", sealed=True, conditions=conditions,
                             contrasts=[])
    run = finished_run(protocol)
    planned = dict(Slot.objects.filter(run=run).values_list("phase").annotate(n=Count("pk")).order_by())
    estimate = estimate_run([CONDITIONS[k] for k in conditions], cohort_shape(world["cohort"]),
                            generator_cap=1600, judge_cap=1600)
    expected = {p.phase: p.calls for p in estimate.phases}
    for phase in ("memories", "generation", "decisions"):
        assert expected[phase] == planned[phase], phase
    assert 0 < planned["judging"] <= expected["judging"]  # identical answers share a grade


@pytest.mark.parametrize("who, status", [("owner", 200), ("analyst", 200), ("viewer", 200), ("rater", 403),
                                         ("outsider", 404)])
def test_the_protocol_page_shows_the_estimate_before_sealing(client, world, who, status):
    draft = make_protocol(world["project"], world["cohort"], "draft", conditions=[MEMORY, OWNWORDS])
    client.force_login(world["users"][who])
    response = client.get(reverse("protocol_detail", args=["alpha", draft.pk]))
    assert response.status_code == status
    if status == 200:
        body = response.content.decode()
        assert 'id="estimate-table"' in body and "<strong>estimate</strong>" in body
        total = response.context["estimate"].calls
        assert f'<th class="num" id="estimate-calls">{total}</th>' in body
        assert "I would say it depends" not in body


def test_the_form_shows_the_estimate_of_what_was_posted_even_when_it_is_refused(client, world):
    make_protocol(world["project"], world["cohort"], "taken")
    client.force_login(world["users"]["analyst"])
    response = client.post(reverse("protocol_create", args=["alpha"]),
                           protocol_form_data(world["cohort"], name="taken", conditions=[MEMORY, FUSION], contrasts=[]))
    body = response.content.decode()
    assert "another protocol of this project has this name" in body
    estimate = response.context["estimate"]
    tasks = len(cohort_tasks(world["cohort"]))
    assert {p.phase: p.calls for p in estimate.phases}["generation"] == 3 * tasks  # the pool, shared with the one-shot
    assert f'<th class="num" id="estimate-calls">{estimate.calls}</th>' in body
