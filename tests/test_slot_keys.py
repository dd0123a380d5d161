"""Slot keys: one builder and one parser (`core.slot_keys`), byte-identical to the keys the engine
has always stored, and no module that takes a key apart by hand."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from experiments.core.conditions import CONDITIONS
from experiments.core.slot_keys import (
    KEY_KINDS, ArchiveKey, DecisionKey, GenerationKey, JudgeKey, Mem0Key, MemoryKey, NotesKey, PairwiseJudgeKey,
    ParaphraseKey,
    SurveyAnswerKey, TagsKey, SurveyMemoryKey, parse_slot_key,
)
from experiments.core.survey.prompt import SURVEY_CONDITIONS

REPO = Path(__file__).resolve().parent.parent
SHA = "0123456789abcdef" * 4

# Each kind built as the engine wrote it before the builder existed (the f-strings of planning,
# survey and mem0 planning), so that a stored key reads the same.
WRITTEN = [
    (MemoryKey(session_id=12, memory_kind="concrete", words=100), "memory|12|concrete|100"),
    (GenerationKey(task_id=7, messages_sha=SHA[:32], index=2), f"gen|7|{SHA[:32]}|2"),
    (ArchiveKey(task_id=7, messages_sha=SHA[:32]), f"archive|7|{SHA[:32]}"),
    (NotesKey(task_id=7, messages_sha=SHA[:32]), f"notes|7|{SHA[:32]}"),
    (ParaphraseKey(task_id=7, messages_sha=SHA[:32]), f"paraphrase|7|{SHA[:32]}"),
    (TagsKey(session_id=12, messages_sha=SHA[:32]), f"tags|12|{SHA[:32]}"),
    (DecisionKey(task_id=7, condition="memory(concrete,100w)+fusion(3)"),
     "decision|7|memory(concrete,100w)+fusion(3)"),
    (DecisionKey(task_id=7, condition="memgpt-style(B=|memory|)"), "decision|7|memgpt-style(B=|memory|)"),
    (JudgeKey(task_id=7, answer_sha=SHA), f"judge|7|{SHA}"),
    (PairwiseJudgeKey(task_id=7, sha_a=SHA, sha_b=SHA[::-1]), f"pairjudge|7|{SHA}|{SHA[::-1]}"),
    (Mem0Key(session_id=12), "mem0|12"),
    (SurveyMemoryKey(respondent_id=3), "survey-memory|3"),
    (SurveyAnswerKey(respondent_id=3, condition="survey:ownwords(B=|memory|)"), "survey|3|survey:ownwords(B=|memory|)"),
]


@pytest.mark.parametrize("key, text", WRITTEN, ids=[text for _, text in WRITTEN])
def test_each_kind_builds_the_stored_text_and_parses_back(key, text):
    assert str(key) == text
    assert parse_slot_key(text) == key
    assert text.startswith(type(key).prefix())


def test_every_kind_is_covered():
    assert {type(key) for key, _ in WRITTEN} == set(KEY_KINDS.values())


@pytest.mark.parametrize("condition", [*CONDITIONS, *SURVEY_CONDITIONS])
def test_every_condition_round_trips_also_with_a_bar_in_it(condition):
    # the interview and survey conditions, with "|" in `(B=|memory|)`
    for key in (DecisionKey(task_id=41, condition=condition), SurveyAnswerKey(respondent_id=41, condition=condition)):
        assert parse_slot_key(str(key)) == key


def test_there_are_conditions_with_a_bar():
    assert any("|" in c for c in CONDITIONS) and any("|" in c for c in SURVEY_CONDITIONS)


def test_a_prefix_names_the_kind_and_its_leading_parts():
    assert ArchiveKey.prefix() == "archive|"
    assert ArchiveKey.prefix(7) == "archive|7|"
    assert Mem0Key.prefix() == "mem0|"
    assert not SurveyAnswerKey(respondent_id=3, condition="x").__str__().startswith(SurveyMemoryKey.prefix())


@pytest.mark.parametrize("text", ["", "memory", "memory|1|concrete", "gen|1|abc", "nope|1", "judge|x|abc",
                                  "judge|07|abc", "judge| 7|abc", "mem0|", "survey-memory|1|2"])
def test_what_no_builder_makes_is_refused(text):
    with pytest.raises(ValueError):
        parse_slot_key(text)


# --- no key taken apart or put together by hand -------------------------------------------------------

HAND_SPLIT = re.compile(r"""\.(?:r?split|r?partition)\(\s*["']\|["']""")
KEY_LITERAL = re.compile(r"^(?:" + "|".join(map(re.escape, KEY_KINDS)) + r")\|")
PARSER = REPO / "experiments" / "core" / "slot_keys.py"


def _sources() -> list[Path]:
    paths = [*(REPO / "experiments").rglob("*.py"), *(REPO / "tests").glob("*.py"), *(REPO / "benchmarks").glob("*.py")]
    return [path for path in paths if "migrations" not in path.parts and path != PARSER]


def test_no_module_splits_a_key_by_hand():
    found = [f"{path.relative_to(REPO)}:{number}" for path in _sources() if path != Path(__file__)
             for number, line in enumerate(path.read_text().splitlines(), 1) if HAND_SPLIT.search(line)]
    assert found == [], f"split a slot key with core.slot_keys.parse_slot_key: {found}"


def _string_starts(path: Path):
    # an f-string's literal parts are constants of their own
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def test_the_app_builds_no_key_by_hand():
    # the app itself (tests may write a stored key out, as the ones above do)
    found = [f"{path.relative_to(REPO)}:{line}" for path in _sources() if path.is_relative_to(REPO / "experiments")
             for line, text in _string_starts(path) if KEY_LITERAL.match(text)]
    assert found == [], f"build a slot key with core.slot_keys: {found}"


def test_the_checks_see_a_hand_split(tmp_path):
    # checks that find nothing would pass whatever the code does
    assert HAND_SPLIT.search('_, task_id, sha = slot.key.split("|")')
    assert not HAND_SPLIT.search('section.split("| variable | default |", 1)')
    sample = tmp_path / "planner.py"
    sample.write_text('def key(task):\n    return f"judge|{task.pk}|x"\n')
    assert [text for _, text in _string_starts(sample) if KEY_LITERAL.match(text)] == ["judge|"]
