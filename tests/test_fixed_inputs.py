"""The paper's fixed inputs: a fixed task list instead of derived tasks, a person-exclusion list
applied to cohort draws, and people with several sessions kept together (in cohorts and in
every person-clustered interval)."""
import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from experiments.core.cohorts import Candidate, draw_cohort
from experiments.core.interviews.records import ParsedTurn
from experiments.core.fixed_input_lists import FixedInputError, parse_person_list, parse_task_list
from experiments.core.stats import paired_bootstrap
from experiments.core.tasks import TaskRule
from experiments.data.sessions import cohort_draw, sessions_import
from experiments.data.fixed_input_cohorts import cohort_draw_excluding, cohort_from_task_list
from experiments.models import Cohort, Task, TaskSet
from tests.conftest import parsed_session, qa_turns


@pytest.fixture
def sessions(project):
    """Four sessions: person p-a has two (s-a1, s-a2), p-b and p-c one each; tasks derived with 8 pairs."""
    parsed = [
        parsed_session("s-a1", qa_turns(8), person="p-a", study="s1"),
        parsed_session("s-a2", qa_turns(8), person="p-a", study="s2"),
        parsed_session("s-b", qa_turns(8), person="p-b", study="s1"),
        parsed_session("s-c", qa_turns(8) + (ParsedTurn("interviewer", "Anything else before we stop?"),),
                       person="p-c", study="s2"),
    ]
    sessions_import(project=project, parsed=parsed, source_format="jsonl", source_file="fixed.jsonl",
                    task_rule=TaskRule(min_pairs=8, min_targets=2, max_targets=2))
    return project


# --- the files, strictly ------------------------------------------------------------------------

@pytest.mark.parametrize("data, message", [
    (b"", "header"),
    (b"session,turn\ns-a1,2\n", "header"),
    (b"session_id,question_turn\n", "no targets"),
    (b"session_id,question_turn\ns-a1\n", "line 2: expected 2 fields"),
    (b"session_id,question_turn\ns-a1,two\n", "line 2: question_turn must be a whole number"),
    (b"session_id,question_turn\ns-a1,-3\n", "whole number"),
    (b"session_id,question_turn\ns-a1,\xd9\xa3\n", "whole number"),  # an Arabic-Indic digit is not 0-9
    (b"session_id,question_turn\ns-a1,2\ns-a1,2\n", "line 3: the same target as line 2"),
    (b"session_id,question_turn\n,2\n", "session_id must be"),
    (b"session_id,question_turn\ns-a1,2\xff\n", "not UTF-8"),
    (b"session_id,question_turn\ns-a1\x00,2\n", "NUL"),
    (b'session_id,question_turn\n"s-a1,2\n', "malformed CSV"),
])
def test_a_bad_task_list_is_refused_with_its_line(data, message):
    with pytest.raises(FixedInputError, match=message):
        parse_task_list(data)


def test_a_task_list_keeps_file_order_and_a_bom():
    rows = parse_task_list("\ufeffsession_id,question_turn\r\ns-b,10\r\n\r\ns-a1,8\r\n".encode())
    assert [(r.session_id, r.question_turn, r.line) for r in rows] == [("s-b", 10, 2), ("s-a1", 8, 4)]


def test_an_exclusion_list_ignores_comments_and_repeats():
    assert parse_person_list("# development people\np-a\n\n  p-b  \np-a\n") == ["p-a", "p-b"]
    with pytest.raises(FixedInputError, match="NUL"):
        parse_person_list("p-a\x00\n")


# --- a cohort from a fixed task list -----------------------------------------------------------

LIST = "session_id,question_turn\ns-b,12\ns-a2,10\ns-a1,14\ns-a2,8\n"


def test_a_fixed_task_list_becomes_a_cohort_of_exactly_its_targets_in_file_order(sessions):
    derived_before = sessions.current_task_set()
    cohort = cohort_from_task_list(project=sessions, name="benchmark", data=LIST, label="benchmark.csv")
    tasks = [entry.task for entry in cohort.cohort_tasks.order_by("position").select_related("task__session")]
    assert [(t.session.external_id, t.cut) for t in tasks] == [("s-b", 12), ("s-a2", 10), ("s-a1", 14), ("s-a2", 8)]
    assert all(t.answer_turn.index == t.cut + 1 for t in tasks)
    # the record stops at the session's earliest listed cut, as for derived tasks
    assert {t.cut: t.record_cut for t in tasks if t.session.external_id == "s-a2"} == {10: 8, 8: 8}
    assert [t.position for t in tasks if t.session.external_id == "s-a2"] == [1, 0]
    assert cohort.task_set.fixed_list_sha256 and cohort.rule["people"] == 2 and cohort.rule["drawn_sessions"] == 3
    assert "fixed task list" in cohort.task_set.rule_label()
    assert sessions.current_task_set() == derived_before  # a fixed list never becomes the derived set


def test_a_bad_task_list_stores_nothing(sessions):
    counts = (Cohort.objects.count(), TaskSet.objects.count(), Task.objects.count())
    for data, message in [("session_id,question_turn\ns-zz,2\n", "no session 's-zz'"),
                          ("session_id,question_turn\ns-b,1\n", "not an interviewer turn"),
                          ("session_id,question_turn\ns-c,16\n", "not followed by the participant's reply"),
                          ("session_id,question_turn\ns-b,999\n", "not an interviewer turn")]:
        with pytest.raises(FixedInputError, match=message):
            cohort_from_task_list(project=sessions, name="bad", data=data)
    assert (Cohort.objects.count(), TaskSet.objects.count(), Task.objects.count()) == counts


def test_the_command_imports_a_task_list_and_says_what_is_wrong(sessions, tmp_path):
    path = tmp_path / "list.csv"
    path.write_text(LIST)
    out = call_command("import_task_list", str(path), project=sessions.slug, name="cli")
    assert "4 tasks, 3 sessions, 2 people" in out
    path.write_text("session_id,question_turn\ns-b,x\n")
    with pytest.raises(CommandError, match="line 2"):
        call_command("import_task_list", str(path), project=sessions.slug, name="cli-2")


# --- the exclusion list and people with several sessions ---------------------------------------

def test_an_exclusion_list_leaves_out_every_session_of_its_people(sessions):
    cohort = cohort_draw_excluding(project=sessions, name="held-out", size=10, seed=3,
                                   exclusion_list="# dev\np-a\np-nobody\n", label="dev.txt")
    drawn = set(cohort.tasks.values_list("session__external_id", flat=True))
    assert drawn == {"s-b", "s-c"}
    listed = cohort.rule["excluded_people_list"]
    assert listed["people"] == 2 and listed["people_in_project"] == 1 and len(listed["sha256"]) == 64
    # without the list the same seed may take p-a (one of their sessions)
    everyone = cohort_draw(project=sessions, name="all", size=10, seed=3)
    assert len(set(everyone.tasks.values_list("session__person__label", flat=True))) == 3
    assert "excluded_people_list" not in everyone.rule


def test_the_draw_command_takes_an_exclusion_list(sessions, tmp_path):
    path = tmp_path / "dev.txt"
    path.write_text("p-b\np-c\n")
    call_command("draw_cohort", project=sessions.slug, name="cli", size=5, seed=1, exclude_people=str(path))
    assert set(Cohort.objects.get(name="cli").tasks.values_list("session__person__label", flat=True)) == {"p-a"}


def test_a_person_is_never_split_between_cohorts_drawn_apart(sessions):
    first = cohort_draw(project=sessions, name="first", size=10, seed=11)
    taken = set(first.tasks.values_list("session__person__label", flat=True))
    # at most one session per person in a draw ...
    assert first.rule["drawn_sessions"] == len(taken) == 3
    # ... and a later cohort that leaves out the first's people takes none of their other sessions
    second = cohort_draw(project=sessions, name="second", size=10, seed=11, exclude_cohorts=[first])
    assert not second.tasks.exists() or not (set(second.tasks.values_list("session__person__label", flat=True)) & taken)


def test_the_pure_draw_takes_one_session_per_person_whatever_the_seed():
    candidates = [Candidate(f"s{i}", f"study{i % 3}", f"p{i // 2}") for i in range(12)]  # two sessions a person
    for seed in range(20):
        drawn = draw_cohort(candidates, size=12, seed=seed)
        assert len(drawn) == 6 and len({c.person_key for c in drawn}) == 6


def test_the_sessions_of_one_person_travel_together_in_the_bootstrap():
    # person A: two sessions whose differences cancel (+1 in one, -1 in the other); B and C: zero.
    person = np.array(["A", "A", "A", "A", "B", "B", "C", "C"])
    diff = np.array([1.0, 1.0, -1.0, -1.0, 0.0, 0.0, 0.0, 0.0])
    together = paired_bootstrap(person, diff, seed=20260918, draws=2_000, keep_replicates=True)
    assert together.n_people == 3
    assert np.all(together.replicates == 0.0)  # A's sessions are always drawn together, so they always cancel
    # were each session its own cluster, the interval would open
    split = paired_bootstrap(np.array(["A1", "A1", "A2", "A2", "B", "B", "C", "C"]), diff, seed=20260918,
                             draws=2_000)
    assert split.lo < 0 < split.hi


def test_the_analysis_labels_a_persons_sessions_as_one_person(sessions):
    cohort = cohort_from_task_list(project=sessions, name="benchmark", data=LIST)
    labels = {t.session.external_id: t.session.person_id for t in cohort.tasks.select_related("session")}
    # grade_matrix reads task__session__person_id: both of p-a's sessions give the same cluster label
    assert labels["s-a1"] == labels["s-a2"] != labels["s-b"]


# --- the project page -------------------------------------------------------------------------

@pytest.mark.parametrize("who, status", [("owner", 302), ("analyst", 403), ("viewer", 403)])
def test_the_project_page_imports_a_fixed_task_list_for_owners(client, sessions, cast, who, status):
    client.force_login(cast[who])
    page = client.get(reverse("project_detail", args=[sessions.slug])).content.decode()
    assert ('id="task-list-import"' in page) == (who == "owner")
    upload = SimpleUploadedFile("benchmark.csv", LIST.encode(), content_type="text/csv")
    response = client.post(reverse("cohort_task_list", args=[sessions.slug]), {"name": "web", "task_list": upload})
    assert response.status_code == status
    assert Cohort.objects.filter(name="web").exists() == (status == 302)
    if status == 302:
        cohort = Cohort.objects.get(name="web")
        assert response.url == reverse("cohort_detail", args=[sessions.slug, cohort.pk])
        assert cohort.cohort_tasks.count() == 4


def test_a_bad_task_list_upload_says_why_and_stores_nothing(client, sessions, cast):
    client.force_login(cast["owner"])
    upload = SimpleUploadedFile("bad.csv", b"session_id,question_turn\ns-zz,2\n")
    response = client.post(reverse("cohort_task_list", args=[sessions.slug]), {"name": "web", "task_list": upload},
                           follow=True)
    assert "no session &#x27;s-zz&#x27;" in response.content.decode()
    assert not Cohort.objects.filter(name="web").exists()


def test_the_draw_form_takes_an_exclusion_list(client, sessions, cast):
    client.force_login(cast["analyst"])
    upload = SimpleUploadedFile("dev.txt", b"p-a\np-b\n")
    response = client.post(reverse("cohort_draw", args=[sessions.slug]),
                           {"name": "web-draw", "size": 5, "seed": 2, "exclusion_list": upload})
    assert response.status_code == 302
    cohort = Cohort.objects.get(name="web-draw")
    assert set(cohort.tasks.values_list("session__person__label", flat=True)) == {"p-c"}
    assert cohort.rule["excluded_people_list"]["file"] == "dev.txt"
    bad = SimpleUploadedFile("dev.txt", b"p-a\x00\n")
    client.post(reverse("cohort_draw", args=[sessions.slug]),
                {"name": "web-bad", "size": 5, "seed": 2, "exclusion_list": bad})
    assert not Cohort.objects.filter(name="web-bad").exists()
