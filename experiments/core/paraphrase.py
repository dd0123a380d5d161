"""The evidence-paraphrase control (beyond the paper; its closing paragraph asks for "a controlled
paraphrase comparison" to tell preserved content from wording): the messages of its two calls and
the budget rule. Pure Python, no Django.

A paraphrased condition (`conditions.paraphrased_condition`, e.g. `ownwords(B=|memory|)+paraphrased`)
is its verbatim condition with one call before the answer:

- the paraphrase call (`assemble_paraphrase_request`) is given the verbatim evidence of the task —
  the OwnWords or recency excerpts at B, or the whole permitted record — and the budget in
  characters (B, or the verbatim record's own length when the condition has no budget), and
  rewrites it in other words;
- `fit_to_budget` checks the reply against the budget: a reply over it is **cut at the budget**
  (at the last whitespace within it; inside a word only when a single word is longer), and the cut
  is recorded (`FittedParaphrase.cut`, the reply's own length in `chars`);
- the answering call (`assemble_paraphrase_answer`) is the verbatim condition's answering call
  byte for byte, with the fitted paraphrase in place of the verbatim evidence; so verbatim −
  paraphrased differs in the evidence's wording only.

The paraphrase call runs with the base calls (generation phase), the answer in the decisions phase
(`execution.workflow_planning`), as App. F's notes do.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from experiments.core import evidence as ev
from experiments.core.assembly import Assembled, TaskInput, assemble
from experiments.core.conditions import (
    CONDITIONS, PARAPHRASE, PARAPHRASE_PROMPTS, REWRITE_PROMPTS, Condition, get_condition,
)
from experiments.core.prompts import render_prompt


@dataclass(frozen=True)
class FittedParaphrase:
    """The paraphrase as the answering call sees it; `chars` is the reply's length (stripped) before any cut."""

    text: str
    chars: int
    budget: int
    cut: bool


def fit_to_budget(reply: str, budget: int) -> FittedParaphrase:
    """The reply, surrounding whitespace removed, cut at `budget` characters when longer: up to the
    last whitespace within the budget (the text before it, trailing whitespace removed), or the
    first `budget` characters when no whitespace falls within it."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ValueError(f"budget must be a non-negative integer, got {budget!r}")
    text = reply.strip()
    if len(text) <= budget:
        return FittedParaphrase(text, len(text), budget, False)
    head = text[:budget + 1]  # the character just past the budget tells whether a word ends at it
    cut_at = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    kept = text[:cut_at].rstrip() if cut_at > 0 else text[:budget]
    return FittedParaphrase(kept, len(text), budget, True)


def _condition(condition: Condition | str) -> Condition:
    if isinstance(condition, str):
        condition = get_condition(condition)
    if condition.workflow != PARAPHRASE:
        raise ValueError(f"{condition.key} is not a paraphrase condition")
    return condition


def verbatim_evidence(condition: Condition | str, task: TaskInput, *, memory: str | None = None) -> tuple[str, int]:
    """(the verbatim evidence, the paraphrase's budget in characters): the verbatim condition's
    excerpts and B, or the whole record and its own length when there is no budget."""
    verbatim = assemble(_condition(condition), task, memory=memory)
    budget = verbatim.budget if verbatim.budget is not None else verbatim.evidence_chars
    return verbatim.evidence, budget


def assemble_paraphrase_request(condition: Condition | str, task: TaskInput, *, memory: str | None = None) -> Assembled:
    """The paraphrase call: the verbatim evidence and the budget in, the evidence in other words out.
    Its evidence is the verbatim evidence; its budget the paraphrase's."""
    condition = _condition(condition)
    evidence, budget = verbatim_evidence(condition, task, memory=memory)
    system_name, user_name = PARAPHRASE_PROMPTS
    system, system_ref = render_prompt(system_name)
    user, user_ref = render_prompt(user_name, evidence=evidence, chars=str(budget))
    return Assembled(system, user, evidence, len(evidence), (system_ref, user_ref), budget)


def assemble_paraphrase_answer(condition: Condition | str, task: TaskInput, *, paraphrase: str,
                               memory: str | None = None) -> Assembled:
    """The answering call: the verbatim condition's prompt (E.7) with the fitted paraphrase as its
    evidence — the screener, the paraphrase and the question."""
    condition = _condition(condition)
    _, budget = verbatim_evidence(condition, task, memory=memory)
    fields = {"evidence": paraphrase, "question": task.question}
    if condition.with_screener:
        fields["screener"] = ev.screener_block(task.screener)
    system, system_ref = render_prompt(condition.system_prompt)
    user, user_ref = render_prompt(condition.user_prompt, **fields)
    return Assembled(system, user, paraphrase, len(paraphrase), (system_ref, user_ref), budget)


# --- the answer rewrites: judge invariance and the length control ------------------------------

REWRITE_SYSTEM, ANSWER_PARAPHRASE_USER, LENGTH_REWRITE_USER = (
    "rewrite_answer_system", "paraphrase_answer_user", "length_rewrite_user")


def assemble_answer_paraphrase(question: str, answer: str) -> Assembled:
    """The judge-invariance call: one graded answer in other words, its content kept (the same judge
    then grades the paraphrase). Its evidence is the answer."""
    system, system_ref = render_prompt(REWRITE_SYSTEM)
    user, user_ref = render_prompt(ANSWER_PARAPHRASE_USER, question=question, answer=answer)
    return Assembled(system, user, answer, len(answer), (system_ref, user_ref))


def assemble_length_rewrite(question: str, answer: str, words: int) -> Assembled:
    """The length control's call: one answer rewritten to about `words` words. Its evidence is the answer."""
    if isinstance(words, bool) or not isinstance(words, int) or words < 1:
        raise ValueError(f"the target length must be a positive number of words, got {words!r}")
    system, system_ref = render_prompt(REWRITE_SYSTEM)
    user, user_ref = render_prompt(LENGTH_REWRITE_USER, question=question, answer=answer, words=str(words))
    return Assembled(system, user, answer, len(answer), (system_ref, user_ref))


def length_target(texts) -> int:
    """The target of a length control set from another condition's answers: the median of their
    whitespace-separated word counts, rounded half up, at least one word (missing answers left out)."""
    counts = sorted(len(text.split()) for text in texts if text is not None)
    if not counts:
        raise ValueError("no answer to take a median length from")
    middle = len(counts) // 2
    median = counts[middle] if len(counts) % 2 else (counts[middle - 1] + counts[middle]) / 2
    return max(1, int(median + 0.5))


def rewritten_base(key: str) -> str | None:
    """The base condition of a rewritten condition's key (`<base>+answer-paraphrased`, `<base>+length(60w)`,
    `<base>+length(median:<other>)`), or None when the key is no rewrite."""
    condition = CONDITIONS.get(key)
    if condition is None or condition.workflow not in REWRITE_PROMPTS:
        return None
    if condition.length_from is not None:
        return key[:-len(f"+length(median:{condition.length_from})")]
    return key[:key.rindex("+")]


# The target as the sealed length-rewrite prompt states it (prompts/length_rewrite_user.txt): the first
# words of its [TASK] section, the prompt's last, after the question and the reply (which may say anything).
_TASK_HEADING = "\n[TASK]\n"
_STATED_TARGET = re.compile(r"Rewrite the reply to about (\d+) words")


def stated_length_target(user: str | None) -> int | None:
    """The target in words a length rewrite's request states (its journaled user message), or None.
    Read at the start of the last [TASK] section only: the prompt ends with it and has no field after
    its target, so a question or a reply that states another target is never read."""
    _, heading, task = ("\n" + (user or "")).rpartition(_TASK_HEADING)
    found = _STATED_TARGET.match(task) if heading else None
    return int(found.group(1)) if found else None


__all__ = ["FittedParaphrase", "assemble_answer_paraphrase", "assemble_length_rewrite", "assemble_paraphrase_answer",
           "assemble_paraphrase_request", "fit_to_budget", "length_target", "rewritten_base", "stated_length_target",
           "verbatim_evidence"]
