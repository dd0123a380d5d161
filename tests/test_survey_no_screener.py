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
