"""Cohort draws: seeded, one session per study per round, one per person, frozen."""
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from experiments.core.cohorts import Candidate, draw_cohort
from experiments.models import Cohort, Task
from experiments.data.sessions import CohortError, canonical_task_list, cohort_draw, cohort_tasks, sessions_import
from tests.conftest import parsed_session, qa_turns


def candidates():
    rows = []
    for study in ("s-b", "s-a", "s-c"):
        for k in range(6):
            # people p0..p3 appear in several studies
            rows.append(Candidate(f"{study}-{k}", study, f"p{k % 4}" if k < 4 else f"{study}-solo{k}"))
    return rows


def test_the_same_seed_draws_the_same_cohort_and_another_seed_differs():
    first = draw_cohort(candidates(), size=8, seed=7)
    again = draw_cohort(list(reversed(candidates())), size=8, seed=7)
    other = draw_cohort(candidates(), size=8, seed=8)
    assert first == again
    assert [c.session_key for c in first] != [c.session_key for c in other]


@pytest.mark.parametrize("seed", range(20))
def test_no_person_is_drawn_twice_and_rounds_visit_studies_in_sorted_order(seed):
    drawn = draw_cohort(candidates(), size=10, seed=seed)
    people = [c.person_key for c in drawn]
    assert len(people) == len(set(people))
    assert [c.study_key for c in drawn[:3]] == ["s-a", "s-b", "s-c"]


def test_it_stops_at_the_size_or_when_nobody_is_left():
    assert len(draw_cohort(candidates(), size=5, seed=1)) == 5
    # 4 shared people + 2 solo people per study = 10 distinct people
    assert len(draw_cohort(candidates(), size=100, seed=1)) == 10


def test_excluded_people_are_never_drawn():
    drawn = draw_cohort(candidates(), size=100, seed=3, excluded_people={"p0", "p1"})
    assert not {"p0", "p1"} & {c.person_key for c in drawn}
    assert len(drawn) == 8


def test_the_shuffle_inside_a_study_uses_pcg64():
    import numpy as np

    one_study = [Candidate(f"x{k}", "only", f"q{k}") for k in range(5)]
    drawn = draw_cohort(one_study, size=5, seed=42)
    expected = np.random.Generator(np.random.PCG64(42)).permutation(5)
    assert [c.session_key for c in drawn] == [f"x{k}" for k in expected]


@pytest.fixture
def many_sessions(project):
    sessions = [
        parsed_session(f"sess-{k:02d}", qa_turns(12), study=f"study-{k % 3}", person=f"person-{k % 9}")
        for k in range(18)
    ]
    sessions_import(project=project, parsed=sessions, source_format="jsonl", source_file="many.jsonl")
    return project


def test_a_drawn_cohort_stores_its_rule_seed_and_task_hash(many_sessions):
    cohort = cohort_draw(project=many_sessions, name="c1", size=6, seed=11)
    tasks = cohort_tasks(cohort)
    assert len(tasks) == 30  # 6 sessions x 5 targets
    assert cohort.rule["seed"] == 11 and cohort.rule["drawn_sessions"] == 6
    import hashlib

    assert cohort.task_list_sha256 == hashlib.sha256(canonical_task_list(tasks).encode()).hexdigest()
    assert len({t.session.person_id for t in tasks}) == 6


def test_the_same_seed_gives_the_same_hash_and_another_seed_another(many_sessions):
    a = cohort_draw(project=many_sessions, name="a", size=5, seed=1)
    b = cohort_draw(project=many_sessions, name="b", size=5, seed=1)
    c = cohort_draw(project=many_sessions, name="c", size=5, seed=2)
    assert a.task_list_sha256 == b.task_list_sha256 != c.task_list_sha256


def test_a_cohort_can_exclude_the_people_of_another(many_sessions):
    first = cohort_draw(project=many_sessions, name="first", size=4, seed=1)
    second = cohort_draw(project=many_sessions, name="second", size=20, seed=1, exclude_cohorts=[first])
    first_people = {t.session.person_id for t in cohort_tasks(first)}
    second_people = {t.session.person_id for t in cohort_tasks(second)}
    assert not first_people & second_people
    assert len(second_people) == 9 - 4


def test_a_cohort_never_changes_after_creation(many_sessions):
    cohort = cohort_draw(project=many_sessions, name="frozen", size=3, seed=5)
    cohort.seed = 6
    with pytest.raises(ValueError, match="never changes"):
        cohort.save()
    assert Cohort.objects.get(pk=cohort.pk).seed == 5


def test_a_cohort_name_is_unique_and_a_project_needs_tasks(project, many_sessions):
    cohort_draw(project=many_sessions, name="dup", size=2, seed=1)
    with pytest.raises(CohortError, match="exists already"):
        cohort_draw(project=many_sessions, name="dup", size=2, seed=1)


def test_drawing_without_tasks_is_refused(project):
    with pytest.raises(CohortError, match="no tasks yet"):
        cohort_draw(project=project, name="x", size=2, seed=1)


def test_the_draw_command_reports_the_cohort(many_sessions):
    out = StringIO()
    call_command("draw_cohort", "--project", "alpha", "--name", "cmd", "--size", "3", "--seed", "9", stdout=out)
    assert "cohort 'cmd': 3 sessions, 15 tasks, sha256 " in out.getvalue()
    with pytest.raises(CommandError, match="no cohort named nope"):
        call_command("draw_cohort", "--project", "alpha", "--name", "x", "--size", "3", "--seed", "9", "--exclude-cohort", "nope")


def test_derive_tasks_with_new_thresholds_makes_a_new_task_set_and_keeps_the_old(many_sessions):
    cohort = cohort_draw(project=many_sessions, name="keep", size=3, seed=9)
    before = [t.pk for t in cohort_tasks(cohort)]
    out = StringIO()
    call_command("derive_tasks", "--project", "alpha", "--min-pairs", "8", "--min-targets", "3", "--max-targets", "4", stdout=out)
    assert "72 new tasks" in out.getvalue()  # 18 sessions x 4 targets
    assert [t.pk for t in cohort_tasks(cohort)] == before
    assert Task.objects.count() == 18 * 5 + 18 * 4
    out = StringIO()
    call_command("derive_tasks", "--project", "alpha", "--min-pairs", "8", "--min-targets", "3", "--max-targets", "4", stdout=out)
    assert out.getvalue().startswith("0 new tasks")
