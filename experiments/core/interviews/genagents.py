"""The genagents interview folder (`nodes.json`, `scratch_demographics.json`, `meta.json`) as one session.

Pure Python (no Django); `readers` re-exports `parse_genagents` and `GENAGENTS_FILES`.
"""
from __future__ import annotations

import math

from experiments.core.interviews.checks import (
    Collector, check_has_participant_speech, check_id, check_text, load_json_strict,
)
from experiments.core.interviews.records import (
    INTERVIEWER, PARTICIPANT, TURN_MAX_CHARS, ParsedSession, ParsedTurn, unstorable_text_problem,
)

GENAGENTS_FILES = ("nodes.json", "scratch_demographics.json", "meta.json")


def parse_genagents(files: dict[str, str], dirname: str) -> list[ParsedSession]:
    """Read a genagents agent folder: `nodes.json` in order, the demographics as screener.

    Each node's content is ``"Interviewer: <question>\\n\\n<first name>: <answer>"``; the
    answer part may be absent (a closing remark) and node 0 is empty.
    """
    out = Collector(dirname)
    for name in GENAGENTS_FILES:
        if name not in files:
            out.add(name, "", "is missing from the genagents folder")
    out.raise_if_any()
    loaded = {}
    for name in GENAGENTS_FILES:
        try:
            loaded[name] = load_json_strict(files[name])
        except (ValueError, RecursionError) as exc:
            out.add(name, "", f"is not valid JSON ({exc})")
    out.raise_if_any()
    meta, demographics, nodes = loaded["meta.json"], loaded["scratch_demographics.json"], loaded["nodes.json"]

    if not isinstance(meta, dict) or "id" not in meta:
        out.add("meta.json", "id", "is missing")
    else:
        check_id(meta["id"], "meta.json", "id", out)
    if not isinstance(demographics, dict):
        out.add("scratch_demographics.json", "", "must be a JSON object")
        demographics = {}
    first_name = demographics.get("first_name")
    if not isinstance(first_name, str) or not first_name.strip():
        out.add("scratch_demographics.json", "first_name", "is missing; it names the participant's turns")
    screener = []
    for key, value in demographics.items():
        if isinstance(value, (dict, list)) or (isinstance(value, float) and not math.isfinite(value)):
            out.add("scratch_demographics.json", key, "must be a plain value")
            continue
        question, answer = key.replace("_", " "), "" if value is None else str(value)
        for text in (question, answer):
            if problem := unstorable_text_problem(text):
                out.add("scratch_demographics.json", key, problem)
        screener.append((question, answer))
    if not isinstance(nodes, list):
        out.add("nodes.json", "", "must be a JSON list of nodes")
    out.raise_if_any()

    turns: list[ParsedTurn] = []
    answer_marker = f"\n\n{first_name}:"
    for position, node in enumerate(nodes):
        where = f"node {position}"
        if not isinstance(node, dict) or not isinstance(node.get("content"), str):
            out.add(f"nodes.json {where}", "content", "must be a string")
            continue
        content = node["content"]
        if not content.startswith("Interviewer:"):
            out.add(f"nodes.json {where}", "content", "must start with 'Interviewer:'")
            continue
        question, _, answer = content[len("Interviewer:"):].partition(answer_marker)
        for speaker, text in ((INTERVIEWER, question.strip()), (PARTICIPANT, answer.strip())):
            if text:
                check_text(text, f"nodes.json {where}", "content", out, limit=TURN_MAX_CHARS)
                turns.append(ParsedTurn(speaker, text))
    check_has_participant_speech(turns, "nodes.json", out)
    out.raise_if_any()
    return [
        ParsedSession(
            session_id=meta["id"],
            person_id=meta["id"],
            study_id="genagents",
            language="en",
            screener=tuple(screener),
            turns=tuple(turns),
            location="nodes.json",
        )
    ]


