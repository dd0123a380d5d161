"""Survey runs with no screener in any condition (paper Table 21's earlier runs): the prompts exactly,
on a hand-made respondent, and the option sealed only when it is on."""
import pytest

from experiments.core.prompts import load_prompt, prompt_ref
from experiments.core.survey.prompt import (
    MEMORY, MEMORY_PLUS_OWNWORDS, MEMORY_PLUS_WHOLE_PERSONA, NO_SCREENER_USER_PROMPTS, OWNWORDS, SCREENER_ONLY,
    SURVEY_CONDITIONS, WHOLE_PERSONA, assemble_survey, assemble_survey_no_screener, condition_label,
    user_prompt_name,
)
from experiments.core.survey.targets import TargetItem
from tests.survey_helpers import SAMPLE

# A hand-made respondent: two items, one ordinal matrix row and one two-option choice.
ITEMS = [
    TargetItem(1, "QID287_10", "QID287", "10", "False consensus", "Do you support each?", "Paid leave",
               ("Oppose", "Neutral", "Support"), "ordinal", 3, 2),
    TargetItem(2, "QID192", "QID192", "", "Allais Form 1", "Choose between:", "", ("Plan A", "Plan B"),
               "two-option", 1, 1),
]
QUESTIONS = ("[SURVEY QUESTIONS]\n"
             "1. Do you support each?\n   Statement: Paid leave\n   Options: 1 = Oppose; 2 = Neutral; 3 = Support\n\n"
             "2. Choose between:\n   Options: 1 = Plan A; 2 = Plan B\n\n"
             "[RESPONSE FORMAT] Answer all 2 numbered items as this respondent would. Return ONLY a JSON object "
             'that maps each item number (as a string) to the number of the chosen option, for example '
             '{"1": 2, "2": 1}. Include every item from 1 to 2. Do not add any other text.')
MEMORY_TEXT = "Saves carefully; reads the news {daily}."
EXCERPTS = "- Q: Do you vote? A: Always"
PERSONA = "Q: Age? A: 41\nQ: Vote? A: Always"
SCREENER = "Region: West\nAge: 41"

EXPECTED = {
    SCREENER_ONLY: QUESTIONS,
    MEMORY: "[INFORMATION ABOUT THIS RESPONDENT]\n[A DESCRIPTION OF THIS RESPONDENT]\n"
            f"{MEMORY_TEXT}\n\n{QUESTIONS}",
    OWNWORDS: "[INFORMATION ABOUT THIS RESPONDENT]\n[RETRIEVED ANSWERS BY THIS RESPONDENT]\n"
              f"{EXCERPTS}\n\n{QUESTIONS}",
    MEMORY_PLUS_OWNWORDS: "[INFORMATION ABOUT THIS RESPONDENT]\n[A DESCRIPTION OF THIS RESPONDENT]\n"
                          f"{MEMORY_TEXT}\n\n[RETRIEVED ANSWERS BY THIS RESPONDENT]\n{EXCERPTS}\n\n{QUESTIONS}",
    WHOLE_PERSONA: "[INFORMATION ABOUT THIS RESPONDENT]\n[THIS RESPONDENT\u2019S EARLIER SURVEY ANSWERS]\n"
                   f"{PERSONA}\n\n{QUESTIONS}",
    MEMORY_PLUS_WHOLE_PERSONA: "[INFORMATION ABOUT THIS RESPONDENT]\n[A DESCRIPTION OF THIS RESPONDENT]\n"
                               f"{MEMORY_TEXT}\n\n[THIS RESPONDENT\u2019S EARLIER SURVEY ANSWERS]\n{PERSONA}\n\n"
                               f"{QUESTIONS}",
}
GIVEN = {"memory": MEMORY_TEXT, "excerpts": EXCERPTS, "persona": PERSONA}


@pytest.mark.parametrize("key", list(SURVEY_CONDITIONS))
def test_the_no_screener_messages_exactly(key):
    fields = {name: GIVEN[name] for name in SURVEY_CONDITIONS[key].evidence}
    sent = assemble_survey_no_screener(key, ITEMS, **fields)
    assert sent.system == load_prompt("survey_answer_system")
    assert sent.user == EXPECTED[key]
    assert "[SCREENER Q&A]" not in sent.user and SCREENER not in sent.user
    assert sent.prompts == (prompt_ref("survey_answer_system"), prompt_ref(NO_SCREENER_USER_PROMPTS[key]))
    assert sent.n_items == 2
    # the same condition with the screener: the screener block is all that differs
    with_screener = assemble_survey(key, ITEMS, screener=SCREENER, **fields)
    if key == SCREENER_ONLY:
        assert with_screener.user == f"[INFORMATION ABOUT THIS RESPONDENT]\n[SCREENER Q&A]\n{SCREENER}\n\n{QUESTIONS}"
    else:
        assert with_screener.user == EXPECTED[key].replace(
            "[INFORMATION ABOUT THIS RESPONDENT]\n", f"[INFORMATION ABOUT THIS RESPONDENT]\n[SCREENER Q&A]\n{SCREENER}\n\n")


def test_every_condition_has_a_no_screener_prompt_that_says_it_is_written_here():
    assert set(NO_SCREENER_USER_PROMPTS) == set(SURVEY_CONDITIONS)
    assert len(set(NO_SCREENER_USER_PROMPTS.values())) == len(SURVEY_CONDITIONS)
    readme = (load_prompt.__globals__["PROMPTS_DIR"] / "README.md").read_text(encoding="utf-8")
    for key, name in NO_SCREENER_USER_PROMPTS.items():
        assert "{screener}" not in load_prompt(name)
        assert user_prompt_name(key, screener=False) == name
        assert user_prompt_name(key) == SURVEY_CONDITIONS[key].user_prompt
    assert "written here" in readme and "survey_answer_questions_only_user" in readme


def test_labels_say_no_screener():
    assert condition_label(MEMORY) == "written memory"
    assert condition_label(MEMORY, screener=False) == "written memory (no screener)"
    assert condition_label(SCREENER_ONLY, screener=False) == "questions only (no screener)"


def test_evidence_must_match_the_condition_without_the_screener_too():
    with pytest.raises(ValueError, match="missing \\['memory'\\]"):
        assemble_survey_no_screener(MEMORY, ITEMS)
    with pytest.raises(ValueError, match="not used \\['persona'\\]"):
        assemble_survey_no_screener(OWNWORDS, ITEMS, excerpts="x", persona="y")
    with pytest.raises(ValueError, match="at least one item"):
        assemble_survey_no_screener(SCREENER_ONLY, [])


# --- sealed, run and shown end to end (offline stand-in) -----------------------------------------

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}


@pytest.fixture
def twin(project):
    from django.core.management import call_command
    from experiments.models import Cohort
    call_command("import_survey", str(SAMPLE), "--project", project.slug, "--name", "twin", "--synthetic")
    return Cohort.objects.get(project=project, name="twin development")


def protocol_without_screener(project, cohort, conditions, name):
    from experiments.models import Protocol
    from tests.engine_helpers import make_protocol
    protocol = make_protocol(project, cohort, conditions=conditions, generator=OFFLINE, name=name)
    Protocol.objects.filter(pk=protocol.pk).update(survey_screener=False)
    protocol.refresh_from_db()
    return protocol


def no_screener_run(project, cohort, conditions, name="no-screener"):
    from experiments.execution.control import run_start
    from experiments.execution.driver import run_inline
    from experiments.execution.sealing import protocol_seal
    from experiments.models import Run
    protocol = protocol_seal(protocol=protocol_without_screener(project, cohort, conditions, name), user=None)
    run = Run.objects.create(protocol=protocol)
    run_start(run=run)
    run = run_inline(run.pk)
    assert run.phase == "done", run.status_reason
    return run


@pytest.mark.django_db
def test_the_option_is_sealed_only_when_off(project, twin):
    from experiments.execution import sealing
    from experiments.execution.survey_planning import survey_settings
    from tests.engine_helpers import make_protocol
    on = make_protocol(project, twin, conditions=[SCREENER_ONLY, MEMORY], generator=OFFLINE, name="on")
    off = protocol_without_screener(project, twin, [SCREENER_ONLY, MEMORY], "off")
    assert survey_settings(on) == {} and "survey_screener" not in sealing.protocol_settings(on)
    assert survey_settings(off) == {"survey_screener": False}
    assert {k: v for k, v in sealing.protocol_settings(off).items() if k != "survey_screener"} == \
        sealing.protocol_settings(on)
    on, off = (sealing.protocol_seal(protocol=p, user=None) for p in (on, off))
    assert set(on.seal["prompts"]) == {"memory_concrete_system", "memory_concrete_user", "survey_answer_memory_user",
                                       "survey_answer_screener_user", "survey_answer_system"}
    assert set(off.seal["prompts"]) == {"memory_concrete_system", "memory_concrete_user",
                                        "survey_answer_memory_no_screener_user", "survey_answer_questions_only_user",
                                        "survey_answer_system"}
    assert on.seal["settings_sha256"] != off.seal["settings_sha256"]
    assert sealing.seal_mismatches(off) == []
    # an interview protocol cannot take the option
    from tests.engine_helpers import ONE_SHOT, build_cohort
    interview = make_protocol(project, build_cohort(project, name="iv"), conditions=[ONE_SHOT], generator=OFFLINE,
                              name="iv")
    interview.survey_screener = False
    assert "only a survey protocol can leave the screener out" in sealing.protocol_problems(interview)


@pytest.mark.django_db
def test_a_run_without_the_screener_end_to_end(client, project, cast, twin):
    from django.urls import reverse

    from experiments.analysis.report_items_survey import table21, table22
    from experiments.core.survey.scores import HUMAN_RETEST
    from experiments.data.surveys import sample_respondents
    from experiments.models import Slot
    run = no_screener_run(project, twin, list(SURVEY_CONDITIONS))
    n = twin.survey_members.count()
    slots = Slot.objects.filter(run=run, phase="generation")
    assert slots.count() == n * len(SURVEY_CONDITIONS)
    from experiments.core.slot_keys import parse_slot_key
    from experiments.core.survey.screener import screener_text
    from experiments.data.surveys import respondent_record
    screeners = {r.pk: screener_text(respondent_record(r)) for r in sample_respondents(twin)}
    questions_only = prompt_ref("survey_answer_questions_only_user")
    for slot in slots:
        assert "[SCREENER Q&A]" not in slot.user
        assert screeners[parse_slot_key(slot.key).respondent_id] not in slot.user
        assert slot.prompt_refs[1][0] in NO_SCREENER_USER_PROMPTS.values()
        if slot.key.endswith("|" + SCREENER_ONLY):
            assert slot.prompt_refs[1] == [questions_only.name, questions_only.sha256]
            assert slot.user.startswith("[SURVEY QUESTIONS]\n")
        else:
            assert slot.user.startswith("[INFORMATION ABOUT THIS RESPONDENT]\n[")
    analysis = run.analysis
    assert analysis["screener"] == "no screener"
    labels = {row["condition"]: row["label"] for row in analysis["means"]}
    assert labels[MEMORY] == "written memory (no screener)" and labels[HUMAN_RETEST] == HUMAN_RETEST
    # the dashboard and its CSV say so (a viewer: numbers only)
    client.force_login(cast["viewer"])
    page = client.get(reverse("survey_dashboard", args=[project.slug, run.pk])).content.decode()
    assert 'id="no-screener-label"' in page and "written memory (no screener)" in page
    csv = client.get(reverse("survey_dashboard_csv", args=[project.slug, run.pk, "means"])).content.decode()
    assert '"written memory (no screener)"' in csv and '"questions only (no screener)"' in csv
    assert csv.startswith('"condition","label","accuracy","deviation","people","items","unscored","reference",'
                          '"accuracy_lo","accuracy_hi","deviation_lo","deviation_hi"')
    # the paper report: Table 21 from the cached differences, Table 22 not from this run
    table = table21(project, [run])
    cached = {(c["first"], c["second"], c["metric"]): c for c in analysis["contrasts"]}
    assert table.inputs.runs == (run.pk,) and table.inputs.offline_runs == (run.pk,)
    assert len(table.rows) == len({(f, s) for f, s, _m in cached})
    row = next(r for r in table.rows if r[2] == "OwnWords (B = |memory|) (no screener) − written memory (no screener)")
    own = cached[(OWNWORDS, MEMORY, "accuracy")], cached[(OWNWORDS, MEMORY, "deviation")]
    assert row[3:] == (own[0]["estimate"], own[0]["lo"], own[0]["hi"], own[1]["estimate"], own[1]["lo"], own[1]["hi"])
    assert row[1] == own[0]["people"]
    assert table22(project, [run]).reason.startswith("no finished survey run with the screener")


@pytest.mark.django_db
def test_the_protocol_form_and_command_set_the_option(client, project, cast, twin, tmp_path):
    import json

    from django.core.management import call_command
    from django.urls import reverse

    from experiments.models import Protocol
    from tests.test_pages_runs import protocol_form_data
    client.force_login(cast["analyst"])
    url = reverse("protocol_create", args=[project.slug])
    assert 'name="survey_no_screener"' in client.get(url).content.decode()
    data = protocol_form_data(twin, conditions=[SCREENER_ONLY, MEMORY], contrasts=[{}, {}, {}])
    response = client.post(url, {**data, "name": "off", "survey_no_screener": "on"})
    assert response.status_code == 302, response.context["editor"].main.errors
    response = client.post(url, {**data, "name": "on"})
    assert response.status_code == 302
    off, on = Protocol.objects.get(name="off"), Protocol.objects.get(name="on")
    assert (off.survey_screener, on.survey_screener) == (False, True)
    page = client.get(reverse("protocol_detail", args=[project.slug, off.pk])).content.decode()
    assert 'id="protocol-no-screener"' in page
    assert 'id="protocol-no-screener"' not in client.get(reverse("protocol_detail", args=[project.slug, on.pk])).content.decode()
    spec = {"name": "cli-off", "cohort": twin.name, "conditions": [SCREENER_ONLY], "generator": OFFLINE,
            "judge": OFFLINE, "survey_screener": False}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(spec))
    call_command("protocol_create", str(path), "--project", project.slug)
    assert Protocol.objects.get(name="cli-off").survey_screener is False


@pytest.mark.django_db
def test_the_estimate_counts_the_prompts_without_the_screener(project, twin):
    from experiments.execution.survey_planning import survey_estimate
    from tests.engine_helpers import make_protocol
    on = make_protocol(project, twin, conditions=[SCREENER_ONLY, MEMORY], generator=OFFLINE, name="on")
    off = protocol_without_screener(project, twin, [SCREENER_ONLY, MEMORY], "off")
    with_screener, without = survey_estimate(on, 800), survey_estimate(off, 800)
    assert without["calls"] == with_screener["calls"] == twin.survey_members.count() * 3
    assert 0 < without["input_tokens"] < with_screener["input_tokens"]
    assert without["phases"][0] == with_screener["phases"][0]  # the memory calls do not show the screener either way
