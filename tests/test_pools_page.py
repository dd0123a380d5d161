"""A run's candidate pools: derived conditions in contrasts, pickers and diagnostics from the database, the page by role."""
import random

import numpy as np
import pytest
from django.test import override_settings
from django.urls import reverse

from experiments.analysis.dashboard import dashboard_refresh
from experiments.analysis.grades import final_grades, grade_matrix, store_scores
from experiments.core.canonical import sha256_text
from experiments.analysis.pools import pools_cached, pools_refresh
from experiments.core import pickers
from experiments.core.parsers import candidate_display_order
from experiments.execution.control import run_start
from experiments.execution.driver import run_inline
from experiments.execution.sealing import protocol_seal
from experiments.data.sessions import cohort_draw
from experiments.models import Grade, PoolAnalysisResult, Prediction, Protocol, Run, Turn

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
C = "memory(concrete,100w)"
T = "memory(trait,100w)"
CONDITIONS = [f"{C}+one-shot", f"{C}+fusion(3)", f"{C}+selection(3)", f"{T}+fusion(3)"]


@pytest.fixture
def pool_run(imported):
    cohort = cohort_draw(project=imported, name="c", size=5, seed=3)
    protocol = Protocol.objects.create(
        project=imported, name="p", cohort=cohort, conditions=CONDITIONS, generator=OFFLINE, judge=OFFLINE,
        contrasts=[
            {"name": "oracle gap", "terms": {f"{C}+oracle": 1, f"{C}+fusion(3)": -1}},
            {"name": "fusion vs candidate mean", "terms": {f"{C}+fusion(3)": 1, f"{C}+candidate-mean": -1}},
            {"name": "b1 vs one-shot", "terms": {f"{C}+b1": 1, f"{C}+one-shot": -1}},
        ],
        bootstrap={"seed": 11, "draws": 300})
    protocol = protocol_seal(protocol=protocol, user=None)
    run = Run.objects.create(protocol=protocol)
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED
    # The analysis phase computed the pool page's numbers, so its first view only reads them.
    assert pools_cached(run) is not None
    vary_the_pools(run)
    return run


def vary_the_pools(run):
    """The offline stand-in answers identical prompts identically, so its pools are all-equal:
    give b1 and b2 texts and grades of their own (as sampled candidates would have), and the
    selector a choice that varies, keeping every stored rule (a selection copies its candidate)."""
    rng = random.Random(5)
    for b0 in Prediction.objects.filter(run=run, label="b0", condition__endswith="+fusion(3)"):
        memory = b0.condition.split("+")[0]
        pool = [f"{memory}+fusion(3)", f"{memory}+selection(3)"]
        words = b0.text.split()
        for label, text in (("b1", b0.text + " and a good deal more besides that"), ("b2", " ".join(words[:4]))):
            sha = sha256_text(text)
            Prediction.objects.filter(run=run, task=b0.task, condition__in=pool, label=label).update(
                text=text, answer_sha256=sha, status=Prediction.Status.OK)
            Grade.objects.get_or_create(run=run, task=b0.task, answer_sha256=sha,
                                        defaults={"status": Grade.Status.OK, "score": rng.randint(0, 3)})
        chosen = Prediction.objects.get(run=run, task=b0.task, condition=pool[1], label=f"b{b0.task_id % 3}") \
            if Prediction.objects.filter(run=run, condition=pool[1]).exists() else None
        if chosen is not None:
            Prediction.objects.filter(run=run, task=b0.task, condition=pool[1], label="final").update(
                text=chosen.text, answer_sha256=chosen.answer_sha256, status=chosen.status, chosen_label=chosen.label)
    store_scores(run.pk)


def candidate_grades(run, condition):
    """{task: [grade of b0, b1, b2]} from Prediction and Grade rows, the slow way."""
    grades = {(g.task_id, g.answer_sha256): g.score for g in Grade.objects.filter(run=run)}
    out = {}
    for p in Prediction.objects.filter(run=run, condition=condition).exclude(label="final"):
        out.setdefault(p.task_id, [None] * 3)[int(p.label[1])] = grades.get((p.task_id, p.answer_sha256))
    return out


def test_derived_columns_and_their_contrasts_come_from_the_candidates(pool_run):
    matrix = grade_matrix(pool_run, [f"{C}+b1", f"{C}+oracle", f"{C}+candidate-mean", f"{C}+one-shot"])
    pools = candidate_grades(pool_run, f"{C}+fusion(3)")
    one_shot = final_grades(pool_run)[f"{C}+one-shot"]
    for t, task in enumerate(matrix.task_ids.tolist()):
        assert matrix.row(f"{C}+b1")[t] == pools[task][1]
        assert matrix.row(f"{C}+oracle")[t] == max(pools[task])
        assert matrix.row(f"{C}+candidate-mean")[t] == pytest.approx(sum(pools[task]) / 3)
        assert one_shot[task] == pools[task][0]          # the one-shot is candidate b0
    payload = dashboard_refresh(pool_run).payload
    by_name = {c["name"]: c for c in payload["contrasts"]}
    fusion = final_grades(pool_run)[f"{C}+fusion(3)"]
    tasks = matrix.task_ids.tolist()
    gap = np.mean([max(pools[t]) - fusion[t] for t in tasks]) / 3
    assert by_name["oracle gap"]["estimate"] == pytest.approx(gap) and by_name["oracle gap"]["estimate"] >= 0
    assert by_name["oracle gap"]["delta_at_least"] is not None
    # a candidate mean is not a whole grade: no threshold table, no transitions, but an interval
    mean_row = by_name["fusion vs candidate mean"]
    assert mean_row["delta_at_least"] is None and "transitions" not in mean_row and mean_row["lo"] is not None
    assert by_name["b1 vs one-shot"]["transitions"]


def test_pickers_inherit_the_picked_candidate_s_grade(pool_run):
    payload = pools_refresh(pool_run).payload
    assert payload["pools"] == [C, T]
    concrete = next(t for t in payload["pickers"] if t["pool"] == C)
    rows = {r["picker"]: r for r in concrete["rows"]}
    assert set(rows) == set(pickers.POOL_RULES) | set(pickers.CROSS_MEMORY)
    texts, grades = {}, candidate_grades(pool_run, f"{C}+fusion(3)")
    for p in Prediction.objects.filter(run=pool_run, condition=f"{C}+fusion(3)").exclude(label="final"):
        texts.setdefault(p.task_id, [None] * 3)[int(p.label[1])] = p.text
    longest = [grades[t][pickers.length_pick(texts[t], "longest")] for t in sorted(texts)]
    assert rows["longest"]["mean_estimate"] == pytest.approx(np.mean(longest) / 3)
    versus = {c["versus"]: c for c in rows["longest"]["contrasts"]}
    mean = [sum(grades[t]) / 3 for t in sorted(texts)]
    assert versus["candidate mean"]["estimate"] == pytest.approx((np.mean(longest) - np.mean(mean)) / 3)
    assert set(versus) == {"candidate mean", "one-shot (b0)", "prompted selector", "fusion"}
    trait = next(t for t in payload["pickers"] if t["pool"] == T)
    assert [c for c in trait["comparators"]] == ["candidate mean", "one-shot (b0)", "fusion"]


def test_diagnostics_match_the_stored_choices(pool_run):
    payload = pools_refresh(pool_run).payload
    concrete = next(d for d in payload["diagnostics"] if d["pool"] == C)
    grades = candidate_grades(pool_run, f"{C}+fusion(3)")
    assert concrete["complete"] == len(grades) == 10
    assert concrete["all_equal"] == sum(len(set(g)) == 1 for g in grades.values())
    finals = {p.task_id: p for p in Prediction.objects.filter(run=pool_run, condition=f"{C}+selection(3)",
                                                              label="final")}
    positions = [0, 0, 0]
    for task, p in finals.items():
        order = [label for label, _ in candidate_display_order(f"task {task}|{C}", [(f"b{i}", "") for i in range(3)])]
        positions[order.index(p.chosen_label)] += 1
    assert concrete["display"]["chosen"] == positions
    matches = sum(grades[t][int(p.chosen_label[1])] == max(grades[t]) for t, p in finals.items())
    assert concrete["oracle_match"][0]["matches"] == matches
    fusion = {p.task_id: p for p in Prediction.objects.filter(run=pool_run, condition=f"{C}+fusion(3)", label="final")}
    assert concrete["fusion"]["copies"] == sum(bool(p.copied_label) for p in fusion.values())
    assert payload["rankers"] == []


@override_settings(OWNWORDS_RANKERS=("experiments.core.rankers:QuestionOverlapRanker",))
def test_a_configured_reranker_is_a_picker_recorded_by_name_and_version(pool_run):
    payload = pools_refresh(pool_run).payload
    assert payload["rankers"] == [{"name": "question-overlap", "version": "1"}]
    rows = {r["picker"]: r for r in payload["pickers"][0]["rows"]}
    assert rows["reranker question-overlap 1"]["n_tasks"] == 10


def test_the_cache_follows_its_inputs(pool_run):
    pools_refresh(pool_run)
    assert pools_cached(pool_run) is not None
    with override_settings(OWNWORDS_RANKERS=("experiments.core.rankers:QuestionOverlapRanker",)):
        assert pools_cached(pool_run) is None                  # another ranker set, other inputs
    p = Prediction.objects.filter(run=pool_run, label="b1").first()
    Prediction.objects.filter(pk=p.pk).update(score=None if p.score else 1)
    assert pools_cached(pool_run) is None


EXPECTED = {"owner": 200, "analyst": 200, "viewer": 200, "rater": 403, "outsider": 404}


@pytest.mark.parametrize("who", sorted(EXPECTED))
def test_the_pools_page_by_role(client, cast, pool_run, who):
    client.force_login(cast[who])
    response = client.get(reverse("run_pools", args=[pool_run.protocol.project.slug, pool_run.pk]))
    assert response.status_code == EXPECTED[who]
    if response.status_code == 200:
        body = response.content.decode()
        assert "Pickers on the memory(concrete,100w) pool" in body and "Selector–oracle match" in body
        assert "offline stand-in" in body.lower()
        # numbers only: no participant or predicted text, for any role
        for text in Turn.objects.values_list("text", flat=True):
            assert text not in body
        for text in Prediction.objects.exclude(text=None).exclude(text="").values_list("text", flat=True):
            assert text not in body


def test_anonymous_users_go_to_the_login(client, pool_run):
    response = client.get(reverse("run_pools", args=[pool_run.protocol.project.slug, pool_run.pk]))
    assert response.status_code == 302 and "/accounts/login/" in response.url


@override_settings(OWNWORDS_RANKERS=("no_such_module_xyz:Ranker",))
def test_a_broken_reranker_setting_is_reported_and_nothing_is_stored(client, cast, pool_run):
    client.force_login(cast["owner"])
    # The analysis phase stored numbers for the run as it was before vary_the_pools: the view
    # must neither replace them nor add any.
    stored = list(PoolAnalysisResult.objects.values_list("pk", "inputs_sha256", "computed_at"))
    body = client.get(reverse("run_pools", args=[pool_run.protocol.project.slug, pool_run.pk])).content.decode()
    assert "cannot import" in body
    assert list(PoolAnalysisResult.objects.values_list("pk", "inputs_sha256", "computed_at")) == stored


def test_the_protocol_form_offers_a_pool_s_candidates_and_checks_the_pool(client, cast, imported):
    from tests.test_pages_runs import protocol_form_data
    cohort = cohort_draw(project=imported, name="c1", size=2, seed=1)
    client.force_login(cast["owner"])
    url = reverse("protocol_create", args=[imported.slug])
    assert f'value="{C}+oracle"' in client.get(url).content.decode()
    data = protocol_form_data(cohort, conditions=[f"{C}+one-shot", f"{C}+fusion(3)"], contrasts=[
        {"name": "fusion vs random pick", "first": f"{C}+fusion(3)", "second": f"{C}+candidate-mean"}])
    assert client.post(url, data).status_code == 302
    assert Protocol.objects.get(name="p-new").contrasts[0]["terms"] == {f"{C}+fusion(3)": 1, f"{C}+candidate-mean": -1}
    Protocol.objects.filter(name="p-new").delete()
    data = protocol_form_data(cohort, conditions=[f"{C}+one-shot"], contrasts=[
        {"first": f"{C}+b1", "second": f"{C}+one-shot"}])
    response = client.post(url, data)
    assert response.status_code == 200 and "neither its fusion nor its selection" in response.content.decode()
    assert not Protocol.objects.filter(name="p-new").exists()
