"""Survey prompt assembly: the App. E "Twin-2K-500 answering" prompt byte for byte, the
block order of every condition, and the memory call with the concrete-memory prompt unchanged."""
from pathlib import Path

import pytest

from experiments.core.prompts import load_prompt, prompt_ref
from experiments.core.survey.prompt import (
    MEMORY, MEMORY_PLUS_OWNWORDS, MEMORY_PLUS_WHOLE_PERSONA, OWNWORDS, SCREENER_ONLY, SURVEY_CONDITIONS,
    WHOLE_PERSONA, assemble_survey, assemble_survey_memory, questions_block,
)
from experiments.core.survey.reader import read_survey_path
from experiments.core.survey.screener import screener_text
from experiments.core.survey.targets import TargetItem, target_items
from tests.survey_helpers import SAMPLE

PAPER = Path("/work/shared/paper/000_d10a81cc7fc5e22d.txt")

# App. E.12 "Twin-2K-500 answering", copied from the paper (its typographic apostrophe included).
SYSTEM = ("You are simulating a specific survey respondent. Answer every survey question exactly as this person "
          "would answer it, using the information about them if any is provided. Respond with only the requested "
          "JSON object.")
RESPONSE_FORMAT = ("[RESPONSE FORMAT] Answer all {n} numbered items as this respondent would. Return ONLY a JSON "
                   "object that maps each item number (as a string) to the number of the chosen option, for example "
                   '{"1": 2, "2": 1}. Include every item from 1 to {n}. Do not add any other text.')
INFORMATION = "[INFORMATION ABOUT THIS RESPONDENT]"
SCREENER = "[SCREENER Q&A]"
DESCRIPTION = "[A DESCRIPTION OF THIS RESPONDENT]"
RETRIEVED = "[RETRIEVED ANSWERS BY THIS RESPONDENT]"
EARLIER = "[THIS RESPONDENT\u2019S EARLIER SURVEY ANSWERS]"
QUESTIONS = "[SURVEY QUESTIONS]"


@pytest.mark.skipif(not PAPER.is_file(), reason="the paper's text is not on this machine")
def test_the_quoted_texts_are_the_papers():
    paper = PAPER.read_text(encoding="utf-8")
    for text in (SYSTEM, RESPONSE_FORMAT, INFORMATION, SCREENER, DESCRIPTION, RETRIEVED, EARLIER, QUESTIONS):
        assert f"\u201c{text}\u201d" in paper, text


def test_the_system_prompt_is_verbatim():
    assert load_prompt("survey_answer_system") == SYSTEM


@pytest.mark.parametrize("key", list(SURVEY_CONDITIONS))
def test_every_user_prompt_opens_with_the_screener_and_ends_with_the_response_format(key):
    text = load_prompt(SURVEY_CONDITIONS[key].user_prompt)
    assert text.startswith(f"{INFORMATION}\n{SCREENER}\n{{screener}}\n\n")
    assert text.endswith(f"{QUESTIONS}\n{{questions}}\n\n{RESPONSE_FORMAT}")


@pytest.fixture(scope="module")
def respondent():
    return read_survey_path(SAMPLE)[0]


EVIDENCE = {"memory": "MEMORY TEXT", "excerpts": "EXCERPT LINES", "persona": "PERSONA TEXT"}


@pytest.mark.parametrize("key, blocks", [
    (SCREENER_ONLY, []),
    (MEMORY, [(DESCRIPTION, "memory")]),
    (OWNWORDS, [(RETRIEVED, "excerpts")]),
    (MEMORY_PLUS_OWNWORDS, [(DESCRIPTION, "memory"), (RETRIEVED, "excerpts")]),
    (WHOLE_PERSONA, [(EARLIER, "persona")]),
    (MEMORY_PLUS_WHOLE_PERSONA, [(DESCRIPTION, "memory"), (EARLIER, "persona")]),
])
def test_assembled_messages_byte_for_byte(respondent, key, blocks):
    items = target_items(respondent)
    screener = screener_text(respondent)
    fields = {name: EVIDENCE[name] for _heading, name in blocks}
    sent = assemble_survey(key, items, screener=screener, **fields)
    n = str(len(items))
    expected = (f"{INFORMATION}\n{SCREENER}\n{screener}\n\n"
                + "".join(f"{heading}\n{EVIDENCE[name]}\n\n" for heading, name in blocks)
                + f"{QUESTIONS}\n{questions_block(items)}\n\n" + RESPONSE_FORMAT.replace("{n}", n))
    assert sent.system == SYSTEM
    assert sent.user == expected
    assert sent.n_items == len(items) == int(n)
    assert sent.prompts == (prompt_ref("survey_answer_system"), prompt_ref(SURVEY_CONDITIONS[key].user_prompt))


def test_the_questions_block_numbers_items_and_lists_options():
    items = [
        TargetItem(1, "QID287_10", "QID287", "10", "False consensus", "Do you support each?", "Paid leave",
                   ("Oppose", "Neutral", "Support"), "ordinal", 3, 2),
        TargetItem(2, "QID192", "QID192", "", "Allais Form 1", "Choose between:", "", ("A {x}", "B"),
                   "two-option", 1, 1),
    ]
    assert questions_block(items) == (
        "1. Do you support each?\n   Statement: Paid leave\n   Options: 1 = Oppose; 2 = Neutral; 3 = Support\n\n"
        "2. Choose between:\n   Options: 1 = A {x}; 2 = B")
    with pytest.raises(ValueError, match="numbered 1..n"):
        questions_block(items[1:])


def test_evidence_must_match_the_condition(respondent):
    items, screener = target_items(respondent), screener_text(respondent)
    with pytest.raises(ValueError, match="missing \\['memory'\\]"):
        assemble_survey(MEMORY, items, screener=screener)
    with pytest.raises(ValueError, match="not used \\['persona'\\]"):
        assemble_survey(OWNWORDS, items, screener=screener, excerpts="x", persona="y")
    with pytest.raises(ValueError, match="unknown survey condition"):
        assemble_survey("survey:nothing", items, screener=screener)
    with pytest.raises(ValueError, match="screener"):
        assemble_survey(SCREENER_ONLY, items, screener="")


def test_participant_text_with_braces_is_sent_as_written(respondent):
    items, screener = target_items(respondent), screener_text(respondent)
    sent = assemble_survey(MEMORY, items, screener=screener, memory="likes {n} and {questions}")
    assert "likes {n} and {questions}" in sent.user


def test_the_memory_call_is_the_concrete_memory_prompt_on_the_whole_persona(respondent):
    sent = assemble_survey_memory(respondent.persona_text)
    assert sent.system == load_prompt("memory_concrete_system")
    assert sent.user == load_prompt("memory_concrete_user").replace("{record}", respondent.persona_text) \
        .replace("{words}", "100")
    assert sent.prompts == (prompt_ref("memory_concrete_system"), prompt_ref("memory_concrete_user"))
