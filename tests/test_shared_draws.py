"""Statistics that share their draws give, to the last bit, what one bootstrap per statistic gives.

The reference is the per-statistic computation the dashboard made before shared draws: one
`paired_bootstrap` per interval, on `final_grades`' mapping, in cohort order.  Results are
compared with ``==``, never with a tolerance.
"""
import numpy as np
import pytest
from django.utils import timezone

from experiments import models as m
from experiments.analysis.dashboard import dashboard_compute, dashboard_inputs, dashboard_refresh
from experiments.analysis.grades import final_grades, grade_matrix
from experiments.core import stats
from experiments.core.conditions import ONE_SHOT, OWNWORDS, MEMORY, RECENCY, WHOLE_RECORD, get_condition
from experiments.core.stats.shared import DIRECT_CLUSTERS, INDEX_DTYPE, BootstrapRequest, shared_bootstraps


# --------------------------------------------------------------------------
# The pure engine against paired_bootstrap
# --------------------------------------------------------------------------

def _expected(requests, seed, draws):
    return [[stats.paired_bootstrap(r.cluster, r.diff, seed=seed, draws=draws, tails=t) for t in r.tails]
            for r in requests]


def _thirds(rng, size, terms=2):
    grades = rng.integers(0, 4, size=(terms, size)).astype(float)
    coefficients = [1.0, -1.0] if terms == 2 else [1.0, -1.0, -1.0, 1.0]
    return (np.asarray(coefficients) @ grades) / 3


@pytest.mark.parametrize("seed", [1, 20260918, 987654321])
def test_shared_draws_equal_one_bootstrap_per_statistic(seed):
    rng = np.random.default_rng(seed)
    people = 40
    person = np.concatenate([np.arange(people), rng.integers(0, people, 120)])
    person[:60] = 7                                    # one person with many tasks
    fewer = person != 3                                # a missing person: another set of clusters
    study = person % 3                                 # three studies
    tails = (stats.family_tails(8), (0.0, 1.0), (0.1, 0.9))
    requests = [
        BootstrapRequest(person, rng.integers(0, 4, person.size) / 3),               # a mean
        BootstrapRequest(person, _thirds(rng, person.size), ((0.025, 0.975), *tails)),
        BootstrapRequest(person, _thirds(rng, person.size, terms=4)),              # an interaction
        BootstrapRequest(person[fewer], _thirds(rng, int(fewer.sum()))),
        BootstrapRequest(study, _thirds(rng, person.size)),                        # whole studies
        BootstrapRequest(person, np.zeros(person.size)),                           # all ties
        BootstrapRequest(person, rng.normal(size=person.size)),                    # not thirds: computed alone
        BootstrapRequest([f"p{p}" for p in person], _thirds(rng, person.size)),     # string labels
    ]
    for draws, chunk_rows, direct in [(1, 128, 0), (999, 7, 0), (4_321, 128, 0), (6_000, 2_000, 0), (2_500, 99, 64)]:
        # direct=0: every group through the exact keys and windows, even three studies and all ties.
        got = shared_bootstraps(requests, seed=seed, draws=draws, chunk_rows=chunk_rows, direct_clusters=direct)
        assert got == _expected(requests, seed, draws)
        for results in got:
            for r in results:
                assert r.replicates is None and r.weighting == "task" and r.seed == seed and r.draws == draws


def test_many_people_and_the_paper_stream_of_blocks():
    rng = np.random.default_rng(5)
    person = np.repeat(np.arange(1_500), rng.integers(1, 9, 1_500))
    requests = [BootstrapRequest(person, _thirds(rng, person.size), ((0.025, 0.975), stats.family_tails(8)))
                for _ in range(3)]
    assert shared_bootstraps(requests, seed=11, draws=3_000) == _expected(requests, 11, 3_000)


@pytest.mark.parametrize("n", [1, 2, 3, 188, 1_023, 1_024, 65_537])
def test_32_bit_indices_are_the_64_bit_stream_and_chunks_continue_it(n):
    whole = np.random.Generator(np.random.PCG64(3)).integers(0, n, size=(40, n))
    generator = np.random.Generator(np.random.PCG64(3))
    pieces = [generator.integers(0, n, size=(rows, n), dtype=INDEX_DTYPE) for rows in (1, 13, 26)]
    assert np.array_equal(np.vstack(pieces), whole)


def test_bad_input_is_refused_like_paired_bootstrap():
    with pytest.raises(ValueError):
        shared_bootstraps([BootstrapRequest([1, 2], [0.1, np.nan])], seed=1)
    with pytest.raises(ValueError):
        shared_bootstraps([BootstrapRequest([1, 2], [0.1, 0.2], ((0.9, 0.1),))], seed=1)
    with pytest.raises(ValueError):
        shared_bootstraps([BootstrapRequest([1, 2], [0.1, 0.2])], seed=1, draws=0)


# --------------------------------------------------------------------------
# The dashboard against the per-statistic computation
# --------------------------------------------------------------------------

CONDITIONS = ["memory(concrete,100w)+one-shot", "memory(concrete,100w)+fusion(3)", "ownwords(B=|memory|)",
              "memory(concrete,50w)+one-shot", "memory(concrete,200w)+one-shot", "whole-record",
              "current-dialogue"]
CONTRASTS = [
    {"name": "fusion - one-shot", "terms": {CONDITIONS[1]: 1, CONDITIONS[0]: -1}, "family": True,
     "criterion": "interval_above_zero"},
    {"name": "one-shot - ownwords", "terms": {CONDITIONS[0]: 1, CONDITIONS[2]: -1}, "family": True},
    {"name": "whole - dialogue", "terms": {CONDITIONS[5]: 1, CONDITIONS[6]: -1}},
    {"name": "interaction", "terms": {CONDITIONS[1]: 1, CONDITIONS[0]: -1, CONDITIONS[4]: -1, CONDITIONS[3]: 1},
     "family": True},
    {"name": "half", "terms": {CONDITIONS[4]: 0.5, CONDITIONS[3]: -0.5}},
]
# More people than DIRECT_CLUSTERS, so that people go through the exact keys and windows.
SHAPES = {
    "missing grades": dict(tasks=[3] * 80, studies=1, missing=0.15),
    "one person with many tasks": dict(tasks=[60] + [2] * 80, studies=1, missing=0.03),
    "several studies": dict(tasks=[2] * 90, studies=3, missing=0.05),
}


def build_run(seed: int, tasks: list[int], studies: int, missing: float, draws: int) -> m.Run:
    """A finished run graded at random: missing, empty and invalid answers, shared grades, absent rows."""
    rng = np.random.default_rng(seed)
    project = m.Project.objects.create(slug=f"shared-{seed}-{len(tasks)}-{studies}", name="shared draws")
    study_rows = [m.Study.objects.create(project=project, key=f"s{i}") for i in range(studies)]
    people = m.Person.objects.bulk_create([m.Person(project=project, label=f"p{i}") for i in range(len(tasks))])
    task_set = m.TaskSet.objects.create(project=project, min_pairs=1, min_targets=1, max_targets=99,
                                        derived_at=timezone.now())
    task_rows = []
    for i, (person, count) in enumerate(zip(people, tasks)):
        # A person with many tasks has them in several sessions (and studies).
        for part in range(0, count, 30):
            session = m.Session.objects.create(
                project=project, study=study_rows[(i + part) % studies], person=person,
                external_id=f"s{i}-{part}", source_format="jsonl", source_file="synthetic")
            n = min(30, count - part)
            turns = m.Turn.objects.bulk_create([
                m.Turn(session=session, index=j, speaker="interviewer" if j % 2 == 0 else "participant", text="t")
                for j in range(2 * n)])
            task_rows += m.Task.objects.bulk_create([
                m.Task(task_set=task_set, session=session, question_turn=turns[2 * j], answer_turn=turns[2 * j + 1],
                       position=j, pair_number=j, cut=2 * j, record_cut=0) for j in range(n)])
    cohort = m.Cohort.objects.create(project=project, task_set=task_set, name="c", seed=1,
                                     requested_size=len(tasks), rule={}, task_list_sha256="-")
    order = rng.permutation(len(task_rows))            # cohort order interleaves people
    m.CohortTask.objects.bulk_create([m.CohortTask(cohort=cohort, task=task_rows[k], position=3 * i + 1)
                                      for i, k in enumerate(order)])
    protocol = m.Protocol.objects.create(project=project, name="p", cohort=cohort, conditions=CONDITIONS,
                                         generator={}, judge={}, contrasts=CONTRASTS,
                                         bootstrap={"seed": seed, "draws": draws})
    run = m.Run.objects.create(protocol=protocol, status="finished", phase="done")
    predictions, grades = [], []
    for task in task_rows:
        base = int(rng.integers(0, 4))
        for c, key in enumerate(CONDITIONS):
            roll = rng.random()
            if roll < missing / 3:
                continue                                   # no prediction at all
            status = ("ok" if roll > missing else
                      rng.choice(["missing", "empty", "invalid_selection", "pending"]))
            sha = f"{task.pk}-shared" if c in (3, 4) and rng.random() < 0.3 else f"{task.pk}-{c}"
            predictions.append(m.Prediction(run=run, task=task, condition=key, label="final", status=status,
                                            text="an answer", answer_sha256=sha))
            if status in ("ok", "empty") and rng.random() > missing and not any(
                    g.task_id == task.pk and g.answer_sha256 == sha for g in grades[-len(CONDITIONS):]):
                score = int(np.clip(base + rng.integers(-1, 2), 0, 3)) if rng.random() > missing else None
                grades.append(m.Grade(run=run, task=task, answer_sha256=sha, score=score,
                                      status="ok" if score is not None else "missing"))
    m.Prediction.objects.bulk_create(predictions)
    m.Grade.objects.bulk_create(grades)
    return run


def reference_statistics(run: m.Run) -> dict:
    """The dashboard's means, contrasts and sweep as computed before shared draws: one bootstrap per interval."""
    protocol = run.protocol
    table = final_grades(run)
    entries = m.CohortTask.objects.filter(cohort=protocol.cohort).order_by("position")
    task_ids = [e.task_id for e in entries]
    person = {e.task_id: e.task.session.person_id for e in entries}
    study = {e.task_id: e.task.session.study_id for e in entries}
    seed, draws = protocol.bootstrap["seed"], protocol.bootstrap["draws"]
    means = []
    for key in protocol.conditions:
        observed = [t for t in task_ids if table.get(key, {}).get(t) is not None]
        row = {"condition": key, "planned": len(task_ids), "graded": len(observed),
               "missing": len(task_ids) - len(observed), "mean": None, "lo": None, "hi": None}
        if observed:
            scores = stats.normalize([table[key][t] for t in observed])
            result = stats.paired_bootstrap([person[t] for t in observed], scores, seed=seed, draws=draws)
            row.update(mean=result.estimate, lo=result.lo, hi=result.hi, people=result.n_people)
        means.append(row)
    family = [c for c in protocol.contrasts if c.get("family")]
    family_tails = stats.family_tails(len(family))
    contrasts = []
    for contrast in protocol.contrasts:
        names = list(contrast["terms"])
        coefficients = [float(contrast["terms"][n]) for n in names]
        columns = [{t: table.get(n, {}).get(t) for t in task_ids} for n in names]
        paired = stats.paired_set(*columns, person=person)
        grades_matrix = [[np.nan if columns[j][t] is None else columns[j][t] for j in range(len(names))]
                         for t in task_ids]
        bounds = stats.missing_bounds(coefficients, grades_matrix)
        row = {"name": contrast["name"], "terms": contrast["terms"], "family": bool(contrast.get("family")),
               "criterion": contrast.get("criterion"), "planned": len(task_ids), "n_tasks": paired.n_tasks,
               "lost": paired.lost, "bound_lo": bounds.lo, "bound_hi": bounds.hi, "seed": seed, "draws": draws}
        if paired.n_tasks:
            diff = paired.diff(coefficients)
            pointwise = stats.paired_bootstrap(paired.person, diff, seed=seed, draws=draws, keep_replicates=True)
            by_study = stats.study_bootstrap([study[t] for t in paired.keys], diff, seed=seed, draws=draws)
            wtl = stats.win_tie_loss(diff)
            sign = stats.sign_test(paired.person, diff)
            decomposition = stats.threshold_decomposition(*paired.grades, coefficients=coefficients)
            row.update(
                estimate=pointwise.estimate, lo=pointwise.lo, hi=pointwise.hi, people=pointwise.n_people,
                person_weighted=stats.person_weighted(paired.person, diff),
                study_lo=by_study.lo, study_hi=by_study.hi, studies=by_study.n_people,
                wins=wtl.wins, ties=wtl.ties, losses=wtl.losses,
                sign_p=sign.p_value, people_below=sign.negative, people_above=sign.positive,
                delta_at_least=list(decomposition.delta))
            if row["family"]:
                lo, hi = np.percentile(pointwise.replicates, [100 * family_tails[0], 100 * family_tails[1]],
                                       method="linear")
                row.update(family_lo=float(lo), family_hi=float(hi))
            if sorted(coefficients) == [-1.0, 1.0]:
                a, b = (0, 1) if coefficients[0] == 1 else (1, 0)
                row["transitions"] = stats.transition_table(paired.grades[b], paired.grades[a]).tolist()
                row["transition_axes"] = {"rows": names[b], "columns": names[a]}
            if row["criterion"] == "interval_above_zero":
                row["criterion_met"] = bool(pointwise.lo > 0)
        contrasts.append(row)
    lines, reference = {}, None
    builders = {MEMORY: "memory", OWNWORDS: "OwnWords", RECENCY: "most recent sentences"}
    for key in protocol.conditions:
        condition = get_condition(key)
        observed = [t for t in task_ids if table.get(key, {}).get(t) is not None]
        if not observed:
            continue
        scores = stats.normalize([table[key][t] for t in observed])
        if condition.evidence == WHOLE_RECORD:
            reference = float(np.mean(scores))
            continue
        if condition.evidence in builders and condition.workflow == ONE_SHOT and condition.memory_words:
            result = stats.paired_bootstrap([person[t] for t in observed], scores, seed=seed, draws=draws)
            lines.setdefault(builders[condition.evidence], []).append(
                {"words": condition.memory_words, "mean": result.estimate, "lo": result.lo, "hi": result.hi,
                 "condition": key, "tasks": len(observed)})
    for points in lines.values():
        points.sort(key=lambda p: p["words"])
    sweep = {"lines": lines, "whole_record": reference, "shown": any(len(p) > 1 for p in lines.values())}
    return {"means": means, "contrasts": contrasts, "sweep": sweep, "planned_tasks": len(task_ids)}


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [3, 20260918, 4_000_000_007])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_dashboard_statistic_is_the_per_statistic_computation(shape, seed):
    run = build_run(seed % 1_000_003, draws=3_000, **SHAPES[shape])
    run.protocol.bootstrap = {"seed": seed, "draws": 3_000}
    run.protocol.save()
    matrix, _ = dashboard_inputs(run)
    payload = dashboard_compute(run, matrix)
    expected = reference_statistics(run)
    for part in ("means", "contrasts", "sweep", "planned_tasks"):
        assert payload[part] == expected[part], part
    # The shapes do what they say: grades are missing, paired sets differ, intervals exist.
    assert any(c["lost"] for c in payload["contrasts"])
    assert all("lo" in c and c["lo"] is not None for c in payload["contrasts"])
    assert payload["sweep"]["shown"]
    assert min(m["people"] for m in payload["means"]) > DIRECT_CLUSTERS
    if SHAPES[shape]["studies"] > 1:
        assert {c["studies"] for c in payload["contrasts"]} == {SHAPES[shape]["studies"]}
    assert dashboard_refresh(run).payload["contrasts"] == expected["contrasts"]


@pytest.mark.django_db
def test_the_grade_matrix_is_final_grades_in_cohort_order():
    run = build_run(17, tasks=[3] * 12 + [40], studies=2, missing=0.3, draws=100)
    table = final_grades(run)
    matrix = grade_matrix(run, [*CONDITIONS, "never-run"])
    entries = list(m.CohortTask.objects.filter(cohort=run.protocol.cohort).order_by("position")
                   .values_list("task_id", "task__session__person_id", "task__session__study_id"))
    assert matrix.task_ids.tolist() == [e[0] for e in entries]
    assert matrix.person.tolist() == [e[1] for e in entries] and matrix.study.tolist() == [e[2] for e in entries]
    for key in CONDITIONS:
        expected = [table[key].get(t) for t in matrix.task_ids.tolist()]
        assert [None if np.isnan(g) else int(g) for g in matrix.row(key)] == expected
    assert np.isnan(matrix.row("never-run")).all()
    assert sum(np.isnan(matrix.row(k)).sum() for k in CONDITIONS) > 0     # the shape has missing grades
    before = matrix.sha256()
    m.Grade.objects.filter(run=run, score=2).update(score=1)
    assert grade_matrix(run, [*CONDITIONS, "never-run"]).sha256() != before


@pytest.mark.parametrize("negative,positive", [(85, 44), (0, 0), (0, 5), (1, 1), (7, 0), (3_000, 2_990)])
def test_the_sign_test_is_the_exact_binomial_sum(negative, positive):
    import math
    person = np.arange(negative + positive + 2)
    diff = np.array([-1 / 3] * negative + [2 / 3] * positive + [0.0, 1 / 3 - 1 + 2 / 3])
    result = stats.sign_test(person, diff)
    n = negative + positive
    expected = min(1.0, 2 * sum(math.comb(n, i) for i in range(min(negative, positive) + 1)) / 2 ** n)
    assert (result.negative, result.positive, result.zero, result.p_value) == (negative, positive, 2, expected)


@pytest.mark.parametrize("draws", [1, 2, 3, 7, 40, 999, 1_000, 4_321, 100_000, 100_001])
def test_the_positions_read_cover_what_numpy_reads(draws):
    from experiments.core.stats.shared import _read_positions
    probe = np.arange(draws, dtype=float) ** 3          # distinct values: a value tells its positions
    for q in [0, 0.003125, 0.025, 0.1, 1 / 3, 0.5, 0.7, 0.975, 0.996875, 1.0]:
        positions = _read_positions(draws, q)
        value = np.percentile(probe, 100 * q, method="linear")
        assert probe[positions[0]] <= value <= probe[positions[-1]]
        stand_in = probe.copy()
        stand_in[positions[-1] + 1:] = probe[positions[-1]]     # only the positions read matter
        stand_in[:positions[0]] = probe[positions[0]]
        assert np.percentile(stand_in, 100 * q, method="linear") == value


HOSTILE_TEXTS = ["", " ", "one", "  two  words ", "tab\tand\nnew line", "nbsp\u00a0joined", "ideographic\u3000space",
                 "\x1c\x1d\x1e\x1f file separators", "line\u2028para\u2029end", "zero\u200bwidth is not space",
                 "em\u2003dash\u2009thin", "next\x85line", "vertical\x0b\x0cfeeds", "ünïcödé wörds ✓", "a" * 500]


@pytest.mark.django_db
def test_answer_lengths_count_words_as_python_splits_them():
    from experiments.analysis.dashboard import _answer_lengths
    run = build_run(23, tasks=[3] * 5, studies=1, missing=0.0, draws=100)
    texts = {}
    for i, prediction in enumerate(m.Prediction.objects.filter(run=run).order_by("pk")):
        prediction.text = None if i % 17 == 5 else HOSTILE_TEXTS[i % len(HOSTILE_TEXTS)] + f" {i}" * (i % 3)
        prediction.save(update_fields=["text"])
        if prediction.text is not None:
            texts.setdefault(prediction.condition, []).append(prediction.text)
    rows = {r["condition"]: r for r in _answer_lengths(run)}
    for condition in CONDITIONS:
        words = sorted(len(t.split()) for t in texts[condition])
        assert sorted(rows[condition]["words"]) == words and rows[condition]["answers"] == len(words)
        assert rows[condition]["median_words"] == float(np.median(words))
        assert rows[condition]["mean_chars"] == float(np.mean([len(t) for t in texts[condition]]))


def test_paired_matrix_is_paired_set_of_the_rows():
    rng = np.random.default_rng(9)
    grades = rng.integers(0, 4, size=(3, 50)).astype(float)
    grades[rng.random(grades.shape) < 0.2] = np.nan
    keys = rng.permutation(1_000)[:50]
    person = {k: int(k) % 7 for k in keys}
    rows = [{k: (None if np.isnan(g) else g) for k, g in zip(keys, row)} for row in grades]
    expected = stats.paired_set(*rows, person=person)
    got = stats.paired_matrix(grades, keys, person=[person[k] for k in keys])
    assert (got.keys, got.planned, got.lost, got.missing) == (expected.keys, expected.planned, expected.lost,
                                                               expected.missing)
    assert np.array_equal(got.grades, expected.grades) and np.array_equal(got.person, expected.person)
    assert np.array_equal(got.diff((1, -1, 0)), expected.diff((1, -1, 0)))
