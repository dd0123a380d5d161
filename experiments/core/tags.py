"""App. K's tag arm, the pure part: labels generated per session, the cohort's most frequent labels
as the vocabulary, and the 6-10 tags chosen from it. No Django.

Two steps (App. K: "selects 6–10 labels from the 40 most frequent labels among 511 distinct labels
generated from the 188 respondents"): a call per session writes free labels (`parse_labels` reads
its reply); the labels of every session of the run's cohort are counted (`vocabulary`: the 40 most
frequent, ties broken alphabetically); a second call per session chooses tags from that vocabulary
(`parse_choice`: only labels of the vocabulary count, each once, the first 10; fewer than 6 — or
than the whole vocabulary, when it has fewer than 6 — is no choice). The answering call shows the
chosen tags as the memory (`tags_text`).
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from experiments.core.assembly import Assembled, TaskInput
from experiments.core.conditions import TAGS_PROMPTS
from experiments.core.prompts import render_prompt

VOCABULARY_SIZE = 40
MIN_TAGS, MAX_TAGS = 6, 10
MAX_LABEL_CHARS = 60
_SPLIT = re.compile(r"[\n,;]+")
_BULLET = re.compile(r"^\s*(?:[-*•]+|\d+[.)])\s*")


def normal_label(text: str) -> str:
    """A label as counted: bullets and surrounding quotes, spaces and full stops removed, lower case,
    inner whitespace one space."""
    text = _BULLET.sub("", text).strip(" \t\"'`.")
    return " ".join(text.lower().split())


def parse_labels(reply: str) -> list[str]:
    """The labels of a label-writing reply: a JSON list (or {"labels": [...]}) or text split at line
    breaks, commas and semicolons; normalised, empty and over-long ones dropped, each once, in order."""
    items: Iterable = ()
    try:
        parsed = json.loads(reply)
        items = parsed.get("labels", ()) if isinstance(parsed, dict) else parsed if isinstance(parsed, list) else ()
    except ValueError:
        items = _SPLIT.split(reply)
    labels = [normal_label(item) for item in items if isinstance(item, str)]
    return list(dict.fromkeys(label for label in labels if label and len(label) <= MAX_LABEL_CHARS))


def vocabulary(label_lists: Iterable[list[str]], size: int = VOCABULARY_SIZE) -> list[str]:
    """The `size` most frequent labels over the sessions (a label counts once per session), most
    frequent first, ties in alphabetical order."""
    counts = Counter(label for labels in label_lists for label in dict.fromkeys(labels))
    return [label for label, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:size]]


@dataclass(frozen=True)
class ChosenTags:
    tags: tuple[str, ...]
    error: str = ""

    @property
    def usable(self) -> bool:
        return not self.error


def parse_choice(reply: str, vocabulary_labels: list[str]) -> ChosenTags:
    """The tags a choosing reply names ({"tags": [...]} or a JSON list), kept when in the vocabulary."""
    try:
        parsed = json.loads(reply)
    except ValueError:
        return ChosenTags((), "the reply is not JSON")
    items = parsed.get("tags") if isinstance(parsed, dict) else parsed
    if not isinstance(items, list):
        return ChosenTags((), 'no "tags" list in the reply')
    known = set(vocabulary_labels)
    chosen = [label for label in dict.fromkeys(normal_label(item) for item in items if isinstance(item, str))
              if label in known][:MAX_TAGS]
    needed = min(MIN_TAGS, len(vocabulary_labels))
    if len(chosen) < max(needed, 1):
        return ChosenTags(tuple(chosen), f"{len(chosen)} tags of the vocabulary chosen, {max(needed, 1)} needed")
    return ChosenTags(tuple(chosen))


def tags_text(tags: Iterable[str]) -> str:
    """The chosen tags as the answering call shows them: one line, comma-separated."""
    return ", ".join(tags)


def vocabulary_block(vocabulary_labels: list[str]) -> str:
    """The vocabulary as the choosing call shows it: one label per line."""
    return "\n".join(vocabulary_labels)


def assemble_tags_choice(task_input: TaskInput, vocabulary_labels: list[str]) -> Assembled:
    """The choosing call: the permitted record and the vocabulary in, {"tags": [...]} out; its
    evidence is the record."""
    record = task_input.record()
    system_name, user_name = TAGS_PROMPTS
    system, system_ref = render_prompt(system_name)
    user, user_ref = render_prompt(user_name, record=record, vocabulary=vocabulary_block(vocabulary_labels))
    return Assembled(system, user, record, len(record), (system_ref, user_ref))
