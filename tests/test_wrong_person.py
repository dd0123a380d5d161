"""App. K's wrong-person control: the seeded derangement (pure), the condition's messages (another
person's memory under the memory header), its seal, a full offline run of the `wrong-person` template,
and the report's Tables 31 and 32 as far as a run of this app gives them."""
import hashlib

import numpy as np
import pytest

from experiments.analysis import report_items_conditions as items
from experiments.analysis.grades import final_grades
from experiments.core.assembly import TaskInput, assemble
from experiments.core.condition_families import condition_family
from experiments.core.conditions import WRONG_PERSON, get_condition
from experiments.core.evidence import INTERVIEWER, PARTICIPANT, TurnText
from experiments.core.paper_protocols import PAPER_PROTOCOLS
from experiments.core.report_table import Missing, ReportTable
from experiments.core.stats.paired import paired_bootstrap
from experiments.core.wrong_person import MAX_DRAWS, WRONG_PERSON_SEED, donor_sessions, wrong_person_seed
from experiments.execution.control import run_start
from experiments.execution.driver import run_inline
from experiments.execution.protocol_templates import protocol_estimate, protocol_from_template
from experiments.execution.sealing import protocol_problems, protocol_seal
from experiments.models import Memory, Prediction, Run, Session
from tests.engine_helpers import build_cohort, make_protocol, make_run

KEY = "memory(concrete,100w)+wrong-person(seed=20260917)"
OWN = "memory(concrete,100w)+one-shot"
TRAIT = "memory(trait,100w)+one-shot"
OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}


# --- the derangement ----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, WRONG_PERSON_SEED])
@pytest.mark.parametrize("people", [
    {1: "a", 2: "b"},
    {s: f"p{s}" for s in range(1, 30)},
    {1: "a", 2: "a", 3: "b", 4: "c", 5: "d", 6: "a"},  # a person with three of six sessions
])
def test_no_one_gets_their_own_and_every_memory_is_shown_once(people, seed):
    donors = donor_sessions(people, seed)
    assert sorted(donors) == sorted(people) and sorted(donors.values()) == sorted(people)  # a permutation
    assert all(people[session] != people[donor] for session, donor in donors.items())   # never the own person
    assert donor_sessions(dict(reversed(list(people.items()))), seed) == donors          # the seed decides, not the order


def test_the_seed_is_recorded_and_changes_the_assignment():
    people = {s: f"p{s}" for s in range(1, 12)}
    assert donor_sessions(people, 20260917) == donor_sessions(people, 20260917)
    assert len({tuple(sorted(donor_sessions(people, seed).items())) for seed in range(8)}) > 1
    assert donor_sessions({1: "a", 2: "b"}, 5) == {1: 2, 2: 1}  # the only derangement of two
    assert donor_sessions({}, 5) == {}
    assert wrong_person_seed(KEY) == WRONG_PERSON_SEED == 20260917
    with pytest.raises(ValueError, match="not a wrong-person condition key"):
        wrong_person_seed(OWN)


def test_it_is_uniform_over_the_derangements_of_three():
    # The two derangements of three sessions come up about equally often over many seeds.
    counts = {}
    for seed in range(400):
        donors = donor_sessions({1: "a", 2: "b", 3: "c"}, seed)
        counts[tuple(donors[s] for s in (1, 2, 3))] = counts.get(tuple(donors[s] for s in (1, 2, 3)), 0) + 1
    assert set(counts) == {(2, 3, 1), (3, 1, 2)} and min(counts.values()) > 150


@pytest.mark.parametrize("people", [{1: "a"}, {1: "a", 2: "a", 3: "b"}])
def test_impossible_assignments_are_refused(people):
    with pytest.raises(ValueError, match="no wrong-person assignment"):
        donor_sessions(people, 1)
    assert MAX_DRAWS == 10_000


# --- the condition --------------------------------------------------------------------------------

def test_the_condition_shows_the_memory_it_is_given_under_the_memory_header():
    turns = (TurnText(0, INTERVIEWER, "Hello?"), TurnText(1, PARTICIPANT, "I garden."),
             TurnText(2, INTERVIEWER, "What do you grow?"))
    task = TaskInput(question="What do you grow?", turns=turns, cut=2, record_cut=2, screener=(("Age?", "40"),))
    someone_else = "Another person: a pilot who flies at night."
    sent = assemble(KEY, task, memory=someone_else)
    assert sent.user == ("[SCREENER Q&A]\nQ: Age?\nA: 40\n\n[WHAT IS KNOWN ABOUT THIS PARTICIPANT]\n"
                         "Another person: a pilot who flies at night.\n\n[QUESTION]\nWhat do you grow?\n\n"
                         "Answer as this participant would. Write ONLY their reply.")
    assert sent.user == assemble(OWN, task, memory=someone_else).user  # the own one-shot's prompt, byte for byte
    condition = get_condition(KEY)
    assert condition.evidence == WRONG_PERSON and condition_family(condition) == "memory"
    pinned = ('{"auxiliary_prompts":[],"budget":null,"candidates":1,"decision_instruction":null,"decision_layout":null,'
              '"evidence":"wrong-person","key":"memory(concrete,100w)+wrong-person(seed=20260917)",'
              '"memory_kind":"concrete","memory_words":100,"runnable":true,"system_prompt":"generation_system",'
              '"user_prompt":"answer_memory_user","with_screener":true,"workflow":"one-shot"}')
    assert condition.canonical_json() == pinned
    assert condition.spec_sha256() == hashlib.sha256(pinned.encode()).hexdigest()


def test_a_cohort_of_one_person_cannot_seal_the_control(project):
    cohort = build_cohort(project, sessions=1, targets=1, name="alone")
    protocol = make_protocol(project, cohort, conditions=[OWN, KEY], generator=OFFLINE)
    assert any(p.startswith(f"{KEY}: no wrong-person assignment") for p in protocol_problems(protocol))


# --- the template, end to end ------------------------------------------------------------------------

def test_the_template_runs_end_to_end_and_each_session_sees_another_persons_memory(project):
    assert isinstance(items.table31(project, []), Missing) and items.table31(project, []).template == "wrong-person"
    template = PAPER_PROTOCOLS["wrong-person"]
    assert template.conditions == (OWN, KEY, "screener-only") and template.bootstrap == {"seed": 20260917,
                                                                                           "draws": 10_000}
    assert [c["terms"] for c in template.contrasts][0] == {OWN: 1, KEY: -1}
    cohort = build_cohort(project, sessions=4, targets=2, name="wrong")
    protocol, _ = protocol_from_template(template=template.key, cohort=cohort)
    estimate = {p.phase: p.calls for p in protocol_estimate(protocol).phases}
    assert estimate == {"memories": 4, "generation": 3 * 8, "decisions": 0, "judging": 3 * 8}
    protocol = protocol_seal(protocol=protocol, user=None)
    run = Run.objects.create(protocol=protocol)
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED, run.status_reason

    memories = {m.session_id: m.text for m in Memory.objects.filter(run=run, kind="concrete")}
    assert len(set(memories.values())) == 4  # four different memories, so the check below means something
    people = {}
    for prediction in Prediction.objects.filter(run=run, condition=KEY).select_related("task__session"):
        session = prediction.task.session
        people[session.pk] = session.person_id
        donor = next(s for s, text in memories.items() if text == prediction.evidence)
        assert donor != session.pk
        assert donor == donor_sessions({s: Session.objects.get(pk=s).person_id for s in memories}, 20260917)[session.pk]
    assert len(people) == 4

    table = items.table31(project, [run])
    assert isinstance(table, ReportTable) and table.inputs.runs == (run.pk,) and table.inputs.seeds == (20260917,)
    assert [row[0] for row in table.rows] == ["own concrete memory", "wrong person's concrete memory",
                                              "screener-only reference", "own − wrong person"]
    grades = final_grades(run)
    assert table.rows[0][2] == pytest.approx(np.mean(list(grades[OWN].values())) / 3)
    assert table.rows[3][3] == pytest.approx(table.rows[0][2] - table.rows[1][2])
    assert any("offline stand-in" in note for note in table.notes)


def test_table_32_drops_the_people_with_two_sessions(project):
    assert items.table32(project, []).template == "common"
    cohort = build_cohort(project, sessions=4, targets=2, name="ct")
    run = run_inline(make_run(project, cohort, conditions=[OWN, TRAIT], generator=OFFLINE,
                              bootstrap={"seed": 4, "draws": 300}).pk)
    assert run.status == Run.Status.FINISHED, run.status_reason
    sessions = sorted({p.task.session for p in Prediction.objects.filter(run=run).select_related("task__session")},
                      key=lambda session: session.pk)
    Session.objects.filter(pk=sessions[1].pk).update(person_id=sessions[0].person_id)  # one person, two sessions
    table = items.table32(project, [run])
    grades = final_grades(run)
    by_session = {}
    for prediction in Prediction.objects.filter(run=run, condition=OWN).select_related("task"):
        by_session.setdefault(prediction.task.session_id, []).append(prediction.task_id)
    kept = [t for s in sorted(by_session) if s not in (sessions[0].pk, sessions[1].pk) for t in by_session[s]]
    diff = np.array([(grades[OWN][t] - grades[TRAIT][t]) / 3 for t in kept])
    person = np.array([Session.objects.get(pk=s).person_id for s in sorted(by_session)
                       if s not in (sessions[0].pk, sessions[1].pk) for _ in by_session[s]])
    expected = paired_bootstrap(person, diff, seed=4, draws=300)
    assert table.rows[1][0] == "without people with more than one session"
    assert table.rows[1][1:] == pytest.approx((expected.estimate, expected.lo, expected.hi, 4, 2))
    assert table.rows[0][4:] == (8, 3)
    assert table.rows[2] == ("without the historical source-risk people", None, None, None, None, None)


def test_table_31_gives_each_representations_gain_over_the_screener_reference(project):
    cohort = build_cohort(project, sessions=3, targets=2, name="reps")
    run = run_inline(make_run(project, cohort, conditions=["screener-only", OWN, TRAIT], generator=OFFLINE,
                              bootstrap={"seed": 9, "draws": 200}).pk)
    assert run.status == Run.Status.FINISHED, run.status_reason
    table = items.table31(project, [run])
    assert [row[0] for row in table.rows] == ["screener-only reference", "concrete memory", "trait memory",
                                              "concrete memory − screener-only", "trait memory − screener-only"]
    grades = final_grades(run)
    means = [np.mean(list(grades[key].values())) / 3 for key in ("screener-only", OWN, TRAIT)]
    assert [row[2] for row in table.rows[:3]] == pytest.approx(means)
    assert [row[3] for row in table.rows[3:]] == pytest.approx([means[1] - means[0], means[2] - means[0]])
    assert table.inputs.seeds == (9,) and table.inputs.draws == 200 and table.inputs.offline_runs == (run.pk,)
    assert "Representations: run" in table.notes[0] and "6 tasks of 3 people" in table.notes[0]
