"""Slot keys: the one builder and the one parser of the stable key every slot of a run carries. No Django.

A key is its kind and its parts joined by "|" (`memory|<session>|<kind>|<words>`,
`decision|<task>|<condition>`, …). Keys are stored, hashed into receipts and sealed, so the text
built here is the text the engine has always written, byte for byte. A condition may itself
contain "|" (`ownwords(B=|memory|)`, `survey:ownwords(B=|memory|)`), so each kind is split into
its fixed number of parts, the last part taking the rest.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

SEP = "|"


@dataclass(frozen=True, kw_only=True)
class SlotKey:
    """A parsed key; each subclass is one kind, its fields the parts in key order."""

    KIND: ClassVar[str] = ""

    def __str__(self) -> str:
        return SEP.join([self.KIND, *(str(getattr(self, f.name)) for f in dataclasses.fields(self))])

    @classmethod
    def prefix(cls, *leading) -> str:
        """The start every key of this kind (and these leading parts) has: for `startswith` filters."""
        return SEP.join([cls.KIND, *map(str, leading)]) + SEP


@dataclass(frozen=True, kw_only=True)
class MemoryKey(SlotKey):
    KIND: ClassVar[str] = "memory"
    session_id: int
    memory_kind: str
    words: int


@dataclass(frozen=True, kw_only=True)
class GenerationKey(SlotKey):
    """One base call shared by byte-identical messages of a task (`messages_sha`: 32 hex digits)."""
    KIND: ClassVar[str] = "gen"
    task_id: int
    messages_sha: str
    index: int


@dataclass(frozen=True, kw_only=True)
class ArchiveKey(SlotKey):
    """A MemGPT-style archive-query call, shared by identical query messages of a task."""
    KIND: ClassVar[str] = "archive"
    task_id: int
    messages_sha: str


@dataclass(frozen=True, kw_only=True)
class NotesKey(SlotKey):
    """The notes call of a notes-then-answer condition (App. F), shared by identical notes messages of a task."""
    KIND: ClassVar[str] = "notes"
    task_id: int
    messages_sha: str


@dataclass(frozen=True, kw_only=True)
class ParaphraseKey(SlotKey):
    """The paraphrase call of an evidence-paraphrase condition, shared by identical paraphrase messages of a task."""
    KIND: ClassVar[str] = "paraphrase"
    task_id: int
    messages_sha: str


@dataclass(frozen=True, kw_only=True)
class TagsKey(SlotKey):
    """App. K's tag choice of one session (its tags answer every task of the session)."""
    KIND: ClassVar[str] = "tags"
    session_id: int
    messages_sha: str


@dataclass(frozen=True, kw_only=True)
class DecisionKey(SlotKey):
    KIND: ClassVar[str] = "decision"
    task_id: int
    condition: str


@dataclass(frozen=True, kw_only=True)
class JudgeKey(SlotKey):
    KIND: ClassVar[str] = "judge"
    task_id: int
    answer_sha: str


@dataclass(frozen=True, kw_only=True)
class PairwiseJudgeKey(SlotKey):
    """One pairwise-judge call: a task's two distinct answers, `sha_a`'s text shown as A. The
    other order of the same pair is the key with the two swapped, a slot of its own."""
    KIND: ClassVar[str] = "pairjudge"
    task_id: int
    sha_a: str
    sha_b: str


@dataclass(frozen=True, kw_only=True)
class Mem0Key(SlotKey):
    """A session's Mem0 extraction call."""
    KIND: ClassVar[str] = "mem0"
    session_id: int


@dataclass(frozen=True, kw_only=True)
class SurveyMemoryKey(SlotKey):
    KIND: ClassVar[str] = "survey-memory"
    respondent_id: int


@dataclass(frozen=True, kw_only=True)
class SurveyAnswerKey(SlotKey):
    KIND: ClassVar[str] = "survey"
    respondent_id: int
    condition: str


KEY_KINDS: dict[str, type[SlotKey]] = {cls.KIND: cls for cls in (
    MemoryKey, GenerationKey, ArchiveKey, NotesKey, ParaphraseKey, TagsKey, DecisionKey, JudgeKey, PairwiseJudgeKey, Mem0Key, SurveyMemoryKey, SurveyAnswerKey)}


def parse_slot_key(text: str) -> SlotKey:
    """The key's kind and parts; ValueError for a key no builder here makes (unknown kind, too few
    parts, a number that does not read back as written)."""
    kind, sep, rest = text.partition(SEP)
    cls = KEY_KINDS.get(kind)
    if cls is None or not sep:
        raise ValueError(f"not a slot key: {text!r}")
    fields = dataclasses.fields(cls)
    parts = rest.split(SEP, len(fields) - 1)  # the last part takes the rest: a condition may hold "|"
    if len(parts) != len(fields):
        raise ValueError(f"a {kind} key has {len(fields)} parts after its kind: {text!r}")
    try:
        parsed = cls(**{f.name: int(part) if f.type in ("int", int) else part for f, part in zip(fields, parts)})
    except ValueError:
        raise ValueError(f"not a slot key: {text!r}") from None
    if str(parsed) != text:  # " 7" or "07" would read as 7 and build another key
        raise ValueError(f"not a slot key as built: {text!r}")
    return parsed
