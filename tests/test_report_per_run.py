"""Paper-report items from one run (Tables 26, 27; App. F centrality and routing; App. I.6 sampled agreement):
the statistics on hand-checked cases, the builders on a finished offline common run, Missing without one."""
import numpy as np
import pytest

from experiments.analysis import per_run_tables as per_run
from experiments.analysis import report_items_per_run as items
from experiments.core.report_table import Missing, ReportTable
from experiments.core.stats import paired_bootstrap
from experiments.core.stats.memory_gap import class_threshold_table, length_gap_table, session_tertiles
from experiments.core.task_attributes import NOT_SPECIFIC, SPECIFIC, is_specific

THIRD = 1 / 3


# --- Table 26: tertiles of the session length gap, subsets, regression ---------------------------

# Six sessions (one person each); the session with Δn = 30 has three tasks, the others one.
GAP_SESSIONS = ["a", "b", "c", "d", "e", "f", "f", "f"]
GAPS = [-5, 0, 8, 12, 20, 30, 30, 30]
GAP_DIFF = np.array([1, 0, 1, -1, 2, 0, 0, 1]) / 3


def test_tertile_edges_are_taken_over_sessions_not_tasks():
    # Session Δn: -5 0 8 12 20 30 → edges 5.33 and 14.67 (linear quantiles): 8 is in the middle third.
    # Over tasks (30 three times) the lower edge would be 9.33 and 8 would fall in the lowest third.
    labels = session_tertiles(GAP_SESSIONS, GAPS)
    assert labels.tolist() == ["bottom", "bottom", "middle", "middle", "top", "top", "top", "top"]
    with pytest.raises(ValueError, match="more than one length gap"):
        session_tertiles(["a", "a"], [1, 2])


def test_table26_by_hand():
    columns, rows = length_gap_table(GAP_SESSIONS, GAPS, GAP_SESSIONS, GAP_DIFF, seed=5, draws=500)
    assert columns[0] == "Sessions by Δn" and columns[5] == "Concrete − trait"
    by = {row[0]: row for row in rows}
    assert list(by) == ["lowest third of Δn", "middle third of Δn", "highest third of Δn", "|Δn| ≤ 10", "|Δn| ≤ 15",
                        "all sessions", "slope per 10 words of Δn", "fitted difference at Δn = 0"]
    expected = {"lowest third of Δn": ("-5 to 0", 2, 2, (1 + 0) / 3 / 2),
                "middle third of Δn": ("8 to 12", 2, 2, 0.0),
                "highest third of Δn": ("20 to 30", 2, 4, (2 + 0 + 0 + 1) / 3 / 4),
                "|Δn| ≤ 10": ("-5 to 8", 3, 3, 2 / 9),
                "|Δn| ≤ 15": ("-5 to 12", 4, 4, 1 / 12),
                "all sessions": ("-5 to 30", 6, 8, 4 / 3 / 8)}
    for label, (span, sessions, tasks, estimate) in expected.items():
        assert by[label][1:5] == (span, sessions, tasks, sessions)   # one person per session
        assert by[label][5] == pytest.approx(estimate, abs=1e-12)
    # Each group's interval is the paired bootstrap of its own tasks, at the run's seed and draws.
    top = np.array([4, 5, 6, 7])
    reference = paired_bootstrap(np.array(GAP_SESSIONS)[top], GAP_DIFF[top], seed=5, draws=500)
    assert by["highest third of Δn"][6:] == (reference.lo, reference.hi)
    # The regression: ordinary least squares of the difference on Δn / 10, every task weighing the same.
    slope, intercept = np.polyfit(np.array(GAPS) / 10, GAP_DIFF, 1)
    assert by["slope per 10 words of Δn"][5] == pytest.approx(slope, abs=1e-12)
    assert by["fitted difference at Δn = 0"][5] == pytest.approx(intercept, abs=1e-12)
    low, high = by["slope per 10 words of Δn"][6:]
    assert low is None or low <= slope <= high


# --- Table 27: thresholds by answer class --------------------------------------------------------

CLASSES = [SPECIFIC, SPECIFIC, SPECIFIC, NOT_SPECIFIC, NOT_SPECIFIC]
CLASS_PEOPLE = [1, 2, 3, 1, 4]
CONCRETE = [3, 2, 1, 0, 2]
TRAIT = [1, 2, 2, 0, 1]


def test_table27_by_hand():
    columns, rows = class_threshold_table(CLASSES, CLASS_PEOPLE, CONCRETE, TRAIT, seed=3, draws=400)
    assert columns == ("Task class", "Threshold", "Tasks", "People", "Concrete − trait", "95% lo", "95% hi")
    by = {(row[0], row[1]): row for row in rows}
    # specific: ≥1 (1−1, 1−1, 1−1), ≥2 (1−0, 1−1, 0−1), ≥3 (1−0, 0, 0); normalized (2 + 0 − 1) / 3 / 3.
    # other: ≥1 (0, 0), ≥2 (0, 1−0), ≥3 (0, 0); normalized (0 + 1) / 3 / 2.
    expected = {SPECIFIC: (3, 3, [0, 0, THIRD, 1 / 9]), NOT_SPECIFIC: (2, 2, [0, 0.5, 0, 1 / 6]),
                "all tasks": (5, 4, [0, 0.2, 0.2, 2 / 15]), "specific − other": (5, 4, [0, -0.5, THIRD, -1 / 18])}
    for group, (tasks, people, values) in expected.items():
        for threshold, value in zip(("ΔP(≥1)", "ΔP(≥2)", "ΔP(≥3)", "normalized difference"), values):
            row = by[group, threshold]
            assert row[2:4] == (tasks, people), (group, threshold)
            assert row[4] == pytest.approx(value, abs=1e-12), (group, threshold)
    # The normalized difference is the mean of the three ΔP(≥k), in every class (App. I.1).
    for group in (SPECIFIC, NOT_SPECIFIC, "all tasks"):
        assert by[group, "normalized difference"][4] == pytest.approx(
            sum(by[group, f"ΔP(≥{k})"][4] for k in (1, 2, 3)) / 3, abs=1e-12)
    reference = paired_bootstrap([1, 2, 3], np.array([2, 0, -1]) / 3, seed=3, draws=400)
    assert by[SPECIFIC, "normalized difference"][5:] == (reference.lo, reference.hi)


@pytest.mark.parametrize("text, specific", [
    ("We moved to Boston and liked it.", True),          # a capitalized word inside a sentence
    ("I think so. Really I do.", False),                  # sentence-initial capitals and I only
    ("I'm fine, and I've been fine.", False),             # forms of I
    ("It took about 5 years", True),                      # a digit
    ("honestly it is fine! Yes it is.", False),
    ("my sister said \"Hello\" to them", True),           # quoted, still not sentence-initial
])
def test_the_specific_rule_on_hand_made_sentences(text, specific):
    assert is_specific(text) is specific


# --- the builders on a finished offline run of the common template -------------------------------

from experiments.core.canonical import sha256_text  # noqa: E402
from experiments.execution.control import run_start  # noqa: E402
from experiments.execution.driver import run_inline  # noqa: E402
from experiments.execution.protocol_templates import protocol_from_template  # noqa: E402
from experiments.execution.sealing import protocol_seal  # noqa: E402
from experiments.models import Grade, Memory, Prediction, Run, Turn  # noqa: E402
from tests.engine_helpers import build_cohort  # noqa: E402

CONCRETE_KEY, TRAIT_KEY = items.CONCRETE_ONE_SHOT, items.TRAIT_ONE_SHOT
DRAWS = 400


def finished(protocol) -> Run:
    protocol = protocol_seal(protocol=protocol, user=None)
    run = Run.objects.create(protocol=protocol)
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED, run.status_reason
    return run


@pytest.fixture
def common_run(project):
    """A finished offline run of the common template: four sessions (people) of two targets each."""
    cohort = build_cohort(project, sessions=4, targets=2, name="common")
    protocol, _ = protocol_from_template(template="common", cohort=cohort)
    protocol.bootstrap = {"seed": 11, "draws": DRAWS}
    protocol.save(update_fields=["bootstrap"])
    return finished(protocol)


def set_grade(run, prediction, score, text=None):
    """Give one final answer its own text (so no other condition shares its grade) and a grade."""
    text = text or f"answer of {prediction.condition} for task {prediction.task_id}"
    prediction.text, prediction.answer_sha256, prediction.status = text, sha256_text(text), Prediction.Status.OK
    prediction.save(update_fields=["text", "answer_sha256", "status"])
    Grade.objects.update_or_create(run=run, task=prediction.task, answer_sha256=prediction.answer_sha256,
                                   defaults={"status": Grade.Status.OK, "score": score})


def one_shot_layout(run, concrete, trait):
    """Grades of the two one-shot memories in cohort order; returns the tasks (in that order)."""
    tasks = list(run.protocol.cohort.cohort_tasks.order_by("position").select_related("task"))
    for cohort_task, c, t in zip(tasks, concrete, trait):
        for key, score in ((CONCRETE_KEY, c), (TRAIT_KEY, t)):
            set_grade(run, Prediction.objects.get(run=run, task=cohort_task.task, condition=key, label="final"), score)
    return [ct.task for ct in tasks]


def test_table26_and_table27_from_the_run(common_run):
    run = common_run
    tasks = one_shot_layout(run, concrete=[3, 1, 2, 2, 0, 1, 2, 0], trait=[1, 1, 2, 1, 0, 0, 1, 1])
    sessions = list(dict.fromkeys(task.session_id for task in tasks))
    # Δn by session: the concrete memory has 10 + 5i words, the trait memory 10 (so Δn = 0, 5, 10, 15).
    for i, session in enumerate(sessions):
        Memory.objects.filter(run=run, session_id=session, kind="concrete").update(text=" ".join(["w"] * (10 + 5 * i)))
        Memory.objects.filter(run=run, session_id=session, kind="trait").update(text=" ".join(["w"] * 10))
    # Task 0 has a specific reference answer (a name inside the sentence), the others not.
    for index, task in enumerate(tasks):
        Turn.objects.filter(pk=task.answer_turn_id).update(
            text="We drove to Denver that day." if index == 0 else "it was fine, i think. Fine.")
    table = items.table26(run.protocol.project, [run])
    assert isinstance(table, ReportTable)
    assert table.inputs.runs == (run.pk,) and table.inputs.seeds == (11,) and table.inputs.draws == DRAWS
    assert table.inputs.offline_runs == (run.pk,) and any("offline stand-in" in n for n in table.notes)
    by = {row[0]: row for row in table.rows}
    # Task differences (thirds): session 0: +2, 0; session 1: 0, +1; session 2: 0, +1; session 3: +1, −1.
    # Session Δn 0, 5, 10, 15: edges 5 and 10 → lowest third: session 0; middle: 1, 2; highest: 3.
    assert by["lowest third of Δn"][1:6] == ("0", 1, 2, 1, pytest.approx(2 / 3 / 2))
    assert by["middle third of Δn"][1:6] == ("5 to 10", 2, 4, 2, pytest.approx(2 / 3 / 4))
    assert by["highest third of Δn"][1:6] == ("15", 1, 2, 1, pytest.approx(0.0))
    assert by["|Δn| ≤ 10"][2:6] == (3, 6, 3, pytest.approx(4 / 3 / 6))
    assert by["|Δn| ≤ 15"][2:6] == (4, 8, 4, pytest.approx(4 / 3 / 8))

    table = items.table27(run.protocol.project, [run])
    by = {(row[0], row[1]): row for row in table.rows}
    assert by[SPECIFIC, "normalized difference"][2:5] == (1, 1, pytest.approx(2 / 3))
    assert by[NOT_SPECIFIC, "normalized difference"][2:5] == (7, 4, pytest.approx(2 / 3 / 7))
    assert by[SPECIFIC, "ΔP(≥3)"][4] == pytest.approx(1.0)      # 3 against 1


def test_without_a_common_run_the_tables_say_which_template(project):
    cohort = build_cohort(project, sessions=2, targets=1, name="confirmation")
    protocol, _ = protocol_from_template(template="confirmation", cohort=cohort)
    protocol.bootstrap = {"seed": 1, "draws": 100}
    protocol.save(update_fields=["bootstrap"])
    run = finished(protocol)
    for builder in (items.table26, items.table27):
        for runs in ([], [run]):
            missing = builder(project, runs)
            assert isinstance(missing, Missing) and missing.template == "common", builder


# --- App. F: centrality and routing --------------------------------------------------------------

from experiments.core.stats.pool_centrality import (  # noqa: E402
    centralities, centrality_slope, pool_agreement, routing_rows,
)


def test_centrality_is_the_mean_similarity_to_the_other_candidates():
    # token F1: the first two texts are identical (1), the third shares nothing with them (0).
    assert centralities(["a b", "a b", "c d"], "token-f1").tolist() == [0.5, 0.5, 0.0]
    assert pool_agreement(["a b", "a b", "c d"], "token-f1") == pytest.approx(1 / 3)


def test_the_centrality_slope_by_hand():
    # Pool 1 (person 1) and pool 2 (person 2) have unequal grades; pool 3 (person 2) does not and is left out.
    person = [1, 2, 2]
    x = [[0.1, 0.2, 0.3], [0.3, 0.1, 0.2], [0.5, 0.1, 0.1]]
    g = [[0, 1, 2], [1, 1, 2], [1, 1, 1]]
    slope = centrality_slope(person, x, g, seed=9, draws=300)
    # SD of the six kept centralities: sqrt(0.04 / 6). Within pools: Σxy = 0.2 + 0, Σxx = 0.02 + 0.02.
    sd = np.sqrt(0.04 / 6)
    assert (slope.pools, slope.candidates, slope.people) == (2, 6, 2)
    assert slope.sd == pytest.approx(sd) and slope.estimate == pytest.approx(0.2 / 0.04 * sd)
    # The interval: paired_bootstrap's draws of the two people, each draw's pools refitted.
    rng = np.random.Generator(np.random.PCG64(9))
    idx = rng.integers(0, 2, size=(300, 2))
    sxy, sxx = np.array([0.2, 0.0]) / sd, np.array([0.02, 0.02]) / sd ** 2
    replicates = sxy[idx].sum(1) / sxx[idx].sum(1)
    lo, hi = np.percentile(replicates, [2.5, 97.5], method="linear")
    assert (slope.lo, slope.hi) == (pytest.approx(lo), pytest.approx(hi))
    assert slope.undefined_draws == 0
    assert centrality_slope([1], [[0.1, 0.2, 0.3]], [[2, 2, 2]], seed=1, draws=10).estimate is None


def test_a_draw_without_a_slope_leaves_no_interval_and_is_counted():
    # Person 2's pool has equal centralities: a draw of person 2 alone has no slope (0/0).
    person = [1, 2]
    x = [[0.25, 0.5, 0.75], [0.5, 0.5, 0.5]]
    g = [[0, 1, 2], [0, 1, 2]]
    slope = centrality_slope(person, x, g, seed=9, draws=300)
    idx = np.random.Generator(np.random.PCG64(9)).integers(0, 2, size=(300, 2))
    alone = int((idx == 1).all(axis=1).sum())
    assert alone > 0 and slope.undefined_draws == alone
    assert slope.estimate is not None and (slope.lo, slope.hi) == (None, None)


def test_routing_rows_split_the_difference_by_group():
    rows = routing_rows("memory(concrete,100w)", "fusion", "copy status", ["no", "yes", "no", "yes"],
                        ("yes", "no"), [1, 2, 3, 4], np.array([1, 0, -1, 1]) / 3, seed=2, draws=200,
                        compare=("yes", "no"))
    assert [r[3] for r in rows] == ["yes", "no", "yes − no"]
    assert [r[4] for r in rows] == [2, 2, 4]
    assert [r[6] for r in rows] == [pytest.approx(1 / 6), pytest.approx(0.0), pytest.approx(1 / 6)]


CONCRETE_POOL = ("memory(concrete,100w)+fusion(3)", "memory(concrete,100w)+selection(3)")
CANDIDATE_TEXTS = ("alpha beta", "alpha beta", "gamma delta")


def set_prediction(prediction, text, score):
    prediction.text, prediction.answer_sha256, prediction.status = text, sha256_text(text), Prediction.Status.OK
    prediction.score = score
    prediction.save(update_fields=["text", "answer_sha256", "status", "score"])


def test_centrality_and_routing_from_the_run(common_run):
    run = common_run
    tasks = [ct.task for ct in run.protocol.cohort.cohort_tasks.order_by("position").select_related("task")]
    for index, task in enumerate(tasks):
        for label, text, score in zip(("b0", "b1", "b2"), CANDIDATE_TEXTS, (2, 2, 0)):
            for prediction in Prediction.objects.filter(run=run, task=task, condition__in=CONCRETE_POOL, label=label):
                set_prediction(prediction, text, score)
        # Fusion copies b0 (grade 2) on the first four tasks and writes its own answer (grade 0) on the others.
        fused = Prediction.objects.get(run=run, task=task, condition=CONCRETE_POOL[0], label="final")
        set_prediction(fused, CANDIDATE_TEXTS[0] if index < 4 else "something else entirely new", 2 if index < 4 else 0)
    table = items.appendix_f_centrality(run.protocol.project, [run])
    assert isinstance(table, ReportTable) and table.inputs.runs == (run.pk,)
    rows = {(r[0], r[1]): r for r in table.rows}
    assert {similarity for pool, similarity in rows if pool == "memory(concrete,100w)"} == {
        "token-f1", "rouge-l", "char-4gram-cosine"}
    # Every pool: centralities 1/2, 1/2, 0 and grades 2, 2, 0. SD of the centralities sqrt(1/18); within a pool
    # Σxy = (2/3)/SD and Σxx = (1/6)/SD², so the slope is 4·SD grade points per SD, in every draw alike.
    row = rows["memory(concrete,100w)", "token-f1"]
    sd = np.sqrt(1 / 18)
    assert row[2:5] == (8, 24, 4)
    assert row[5] == pytest.approx(4 * sd) and row[6] == pytest.approx(4 * sd) and row[7] == pytest.approx(4 * sd)
    assert row[8] == pytest.approx(sd)

    table = items.appendix_f_routing(run.protocol.project, [run])
    rows = {(r[0], r[1], r[2], r[3]): r for r in table.rows}
    copy = {key[3]: row for key, row in rows.items() if key[:3] == ("memory(concrete,100w)", "fusion", "copy status")}
    assert list(copy) == [per_run.COPY, per_run.NOT_COPY, f"{per_run.COPY} − {per_run.NOT_COPY}"]
    assert copy[per_run.COPY][4:7] == (4, 2, pytest.approx(0.0))              # fusion 2 against the one-shot's 2
    assert copy[per_run.NOT_COPY][4:7] == (4, 2, pytest.approx(-2 / 3))       # fusion 0 against 2
    assert copy[f"{per_run.COPY} − {per_run.NOT_COPY}"][6] == pytest.approx(2 / 3)
    # Every concrete pool agrees alike (1/3): one tertile, the middle one, holds all eight tasks.
    agreement = [row for key, row in rows.items()
                 if key[:3] == ("memory(concrete,100w)", "fusion", "pool agreement (token-f1)")]
    assert [(r[3], r[4]) for r in agreement] == [("middle", 8)]


def test_without_pools_the_appendix_f_items_name_the_common_template(project):
    for builder in (items.appendix_f_centrality, items.appendix_f_routing):
        missing = builder(project, [])
        assert isinstance(missing, Missing) and missing.template == "common"


# --- App. I.6: agreement on a seeded, stratified sample -------------------------------------------

from django.core.management import CommandError, call_command  # noqa: E402

from experiments.core.stats.agreement_stats import agreement_bootstrap  # noqa: E402
from experiments.core.stats.judge_sample import agreement_rows, allocate, stratified_sample  # noqa: E402
from experiments.execution import control  # noqa: E402


def test_allocation_is_even_over_the_strata_and_capped_by_their_size():
    # Round robin a, b, c: (1, 1, 1), a is used up, (1, 2, 2), (1, 3, 3).
    assert allocate({"b": 5, "a": 1, "c": 3}, 7) == {"a": 1, "b": 3, "c": 3}
    assert allocate({"b": 5, "a": 1, "c": 3}, 100) == {"a": 1, "b": 5, "c": 3}
    assert allocate({"x": 250, "y": 251}, 501) == {"x": 250, "y": 251}
    assert allocate({"x": 300, "y": 300}, 501) == {"x": 251, "y": 250}


def test_the_sample_is_drawn_within_strata_by_the_seeded_generator():
    strata = ["x", "y", "x", "y", "y"]
    sample = stratified_sample(strata, 3, seed=4)
    # By hand: x gives 2 (both of its items), y gives 1, drawn in sorted stratum order from one PCG64(4).
    rng = np.random.Generator(np.random.PCG64(4))
    x = np.array([0, 2])[rng.permutation(2)[:2]]
    y = np.array([1, 3, 4])[rng.permutation(3)[:1]]
    assert sample.tolist() == sorted([*x.tolist(), *y.tolist()])
    assert sorted(strata[i] for i in sample) == ["x", "x", "y"]
    assert stratified_sample(strata, 3, seed=4).tolist() == sample.tolist()       # the seed fixes it
    assert stratified_sample(strata, 50, seed=4).tolist() == [0, 1, 2, 3, 4]      # N above the items: all


def test_agreement_rows_by_hand():
    rows = agreement_rows([0, 1, 2, 3, 3], [0, 1, 2, 2, 0], [1, 2, 3, 4, 5], ["a", "a", "b", "b", "b"],
                          np.array([0, 1, 2, 3]), sample_label="s", seed=3, draws=200)
    by = {(r[0], r[1]): r for r in rows}
    assert [key for key in by] == [("s", "exact agreement"), ("s", "within one grade"), ("s", "quadratic-weighted κ"),
                                   ("s", "ordinal α"), ("s: a", "exact agreement"), ("s: a", "within one grade"),
                                   ("s: a", "quadratic-weighted κ"), ("s: a", "ordinal α"),
                                   ("s: b", "exact agreement"), ("s: b", "within one grade"),
                                   ("s: b", "quadratic-weighted κ"), ("s: b", "ordinal α")]
    assert by["s", "exact agreement"][2:5] == (4, 4, 0.75)          # the fifth item is not in the sample
    assert by["s", "within one grade"][4] == 1.0
    assert by["s: a", "exact agreement"][2:5] == (2, 2, 1.0)
    assert by["s: b", "exact agreement"][2:5] == (2, 2, 0.5)
    # κ by hand: pairs (0,0) (1,1) (2,2) (3,2); observed Σw·n = 1/9 · 1, expected from the margins.
    a, b = np.array([0, 1, 2, 3]), np.array([0, 1, 2, 2])
    w = (np.subtract.outer(np.arange(4), np.arange(4)) ** 2) / 9
    observed = np.zeros((4, 4))
    np.add.at(observed, (a, b), 1 / 4)
    expected = np.outer(observed.sum(1), observed.sum(0))
    assert by["s", "quadratic-weighted κ"][4] == pytest.approx(1 - (w * observed).sum() / (w * expected).sum())
    reference = agreement_bootstrap([0, 1, 2, 3], [0, 1, 2, 2], [1, 2, 3, 4], draws=200, seed=3)
    assert by["s", "quadratic-weighted κ"][5:] == (reference.kappa.lo, reference.kappa.hi)


@pytest.fixture
def regraded(project, cast):
    """A finished offline confirmation run and a finished re-grade of it by the same (offline) judge."""
    cohort = build_cohort(project, sessions=3, targets=2, name="judged")
    protocol, _ = protocol_from_template(template="confirmation", cohort=cohort)
    protocol.bootstrap = {"seed": 5, "draws": 300}
    protocol.save(update_fields=["bootstrap"])
    source = finished(protocol)
    # Give every final answer its own text and a grade, so that each condition has answers of its own.
    for i, prediction in enumerate(Prediction.objects.filter(run=source, label="final").order_by("pk")):
        set_grade(source, prediction, i % 4)
    regrade = control.regrade_create(source=source, user=cast["owner"])
    run = Run.objects.create(protocol=regrade)
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED, run.status_reason
    return source, run


def test_the_sampled_agreement_from_a_regrade(regraded, project):
    source, run = regraded
    # The second judge disagrees by one grade on every answer whose first grade is 3.
    Grade.objects.filter(run=run, score=3).update(score=2)
    table = items.appendix_i6_sampled_agreement(project, [source, run], n=7, sample_seed=1)
    assert isinstance(table, ReportTable)
    assert table.inputs.runs == (run.pk, source.pk) and table.inputs.seeds == (5, 1) and table.inputs.draws == 300
    by = {(r[0], r[1]): r for r in table.rows}
    conditions = sorted(source.protocol.conditions)
    assert len(conditions) == 3
    # Seven of 18 answers (6 tasks × 3 conditions): 3, 2 and 2 from the conditions in sorted order.
    for condition, size in zip(conditions, (3, 2, 2)):
        assert by[f"sample of 7 (seed 1): {condition}", "exact agreement"][2] == size
    # The figures are the agreement statistics of the sampled items, recomputed from the grades.
    first = {(g.task_id, g.answer_sha256): g.score for g in Grade.objects.filter(run=source)}
    second = {(g.task_id, g.answer_sha256): g.score for g in Grade.objects.filter(run=run)}
    keys = sorted(set(first) & set(second))
    assert len(keys) == 18
    strata = {(p.task_id, p.answer_sha256): p.condition for p in Prediction.objects.filter(run=source, label="final")}
    sample = stratified_sample([strata[k] for k in keys], 7, seed=1)
    picked = [keys[i] for i in sample]
    exact = sum(first[k] == second[k] for k in picked) / 7
    assert by["sample of 7 (seed 1)", "exact agreement"][2:5] == (7, 3, pytest.approx(exact))
    # The command gives the same rows for the same N and seed.
    out = call_command("judge_sample", run.pk, n=7, seed=1)
    assert f"sample of 7 (seed 1)\texact agreement\t7\t3\t{exact:.3f}" in out
    with pytest.raises(CommandError, match="not a re-grade"):
        call_command("judge_sample", source.pk)
    with pytest.raises(CommandError, match="--n"):
        call_command("judge_sample", run.pk, n=0)


def test_without_a_second_judge_the_agreement_item_says_how_to_get_one(project):
    missing = items.appendix_i6_sampled_agreement(project, [])
    assert isinstance(missing, Missing) and "re-grade" in missing.reason and missing.template is None


def test_the_items_are_kept_with_the_run_tables_and_read_from_there(common_run):
    from experiments.analysis.per_run_tables import COMPUTED, PER_RUN_KEY
    from experiments.analysis.tables import tables_cached, tables_refresh

    run = common_run
    payload = tables_cached(run).payload           # the analysis phase computed them with the tables
    assert set(payload[PER_RUN_KEY]) == {"table8", "table26", "table27", "appendix_f_centrality", "appendix_f_routing"}
    for name, builder in (("table26", items.table26), ("table27", items.table27),
                          ("appendix_f_centrality", items.appendix_f_centrality),
                          ("appendix_f_routing", items.appendix_f_routing)):
        kept = payload[PER_RUN_KEY][name]
        assert builder(run.protocol.project, [run]).as_json() == COMPUTED[name](run).as_json() == kept
    # A changed grade makes the cache stale: the builder computes from the grades, and a refresh keeps that.
    prediction = Prediction.objects.get(run=run, task=run.protocol.cohort.cohort_tasks.first().task,
                                        condition=CONCRETE_KEY, label="final")
    set_grade(run, prediction, 3, text="a new answer")
    assert tables_cached(run) is None
    fresh = items.table27(run.protocol.project, [run])
    assert fresh.as_json() != payload[PER_RUN_KEY]["table27"]
    assert tables_refresh(run).payload[PER_RUN_KEY]["table27"] == fresh.as_json()


def test_the_run_tables_page_shows_the_kept_items_to_a_viewer(client, cast, common_run):
    from django.urls import reverse

    run = common_run
    client.force_login(cast["viewer"])
    page = client.get(reverse("run_tables", args=[run.protocol.project.slug, run.pk])).content.decode()
    for slug in ("table26", "table27", "appendix_f_centrality", "appendix_f_routing"):
        assert f'id="per-run-{slug}"' in page
    assert "all sessions" in page and "ΔP(≥3)" in page and "copy status" in page
    # Numbers only: no reference answer or candidate text reaches the page.
    task = run.protocol.cohort.cohort_tasks.first().task
    assert task.answer_turn.text not in page
    client.force_login(cast["rater"])
    assert client.get(reverse("run_tables", args=[run.protocol.project.slug, run.pk])).status_code in (403, 404)


def test_a_failing_item_is_kept_as_missing_and_never_stops_the_analysis(monkeypatch, caplog):
    def broken(run):
        raise ZeroDivisionError("boom")

    class FakeRun:
        pk = 41

    monkeypatch.setattr(per_run, "feeds", lambda run: ["table26"])
    monkeypatch.setitem(per_run.COMPUTED, "table26", broken)
    payload = per_run.per_run_payload(FakeRun())
    assert payload == {"table26": {"missing": "It could not be computed (ZeroDivisionError); see the server log."}}
    assert "table26 failed" in caplog.text
    assert isinstance(per_run.item_from_json(payload["table26"]), Missing)


def test_the_default_sample_is_kept_with_the_regrade_run(regraded, project):
    from experiments.analysis.per_run_tables import AGREEMENT_ITEM, PER_RUN_KEY, agreement_table
    from experiments.analysis.tables import tables_cached

    source, run = regraded
    kept = tables_cached(run).payload[PER_RUN_KEY]
    assert list(kept) == [AGREEMENT_ITEM]                 # a re-grade feeds only the agreement
    assert AGREEMENT_ITEM not in (tables_cached(source).payload[PER_RUN_KEY] if tables_cached(source) else {})
    built = items.appendix_i6_sampled_agreement(project, [source, run])
    assert built.as_json() == kept[AGREEMENT_ITEM] == agreement_table(run).as_json()
    # The default N (501) is above the 18 answers both judges graded: the sample is all of them.
    assert built.rows[0][0] == "sample of 18 (seed 20260917)" and built.rows[0][2] == 18
