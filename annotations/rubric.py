"""The judge's rubric (paper §3.2) as raters see it — as the study's rubric, the judge never named
on a rater's page: read from the judge's own prompt file.

Raters must grade on the scale the judge used, so the text comes from `prompts/judge_user.txt`
(the grading steps after the prediction block), not from a second copy that could drift.
"""
from __future__ import annotations

from functools import lru_cache

from experiments.core.prompts import load_prompt

JUDGE_PROMPT = "judge_user"
JUDGE_SYSTEM = "judge_system"


@lru_cache(maxsize=1)
def instruction() -> str:
    """The judge's system instruction, less its demand for JSON (raters press keys instead).

    Raters read it as the study's rubric, never as a judge's (blinding: a rater who learns a
    model graded the answers may defer to it), so its one "Judge" (the verb) reads "Grade"."""
    text = load_prompt(JUDGE_SYSTEM).replace("Output valid JSON only.", "")
    return text.replace("Judge CONTENT ONLY", "Grade CONTENT ONLY").strip()


@lru_cache(maxsize=1)
def rubric_lines() -> tuple[str, ...]:
    """The steps and the 3-to-0 scale of the judge prompt, without the JSON output instruction."""
    text = load_prompt(JUDGE_PROMPT)
    steps = text[text.index("Step 1:"):]
    return tuple(line for line in steps.splitlines() if line.strip() and not line.startswith("Return only"))


def grade_labels() -> dict[int, str]:
    """grade → its rubric sentence ("3 = it matches …" → {3: "it matches …"})."""
    labels = {}
    for line in rubric_lines():
        head, sep, rest = line.partition(" = ")
        if sep and head.strip().isdigit():
            labels[int(head)] = rest.strip()
    return labels
