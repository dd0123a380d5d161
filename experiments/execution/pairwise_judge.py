"""Pairwise-judge runs: a finished run's answers compared two by two, nothing generated.

A re-grade-only run like `execution.regrade`, sealed the same way (the source run and its
`answers_digest`, plus its condition pairs), whose judge gets the pairwise prompt
(`assembly.pairwise_judge_assembler`): the question, the real answer, answer A and answer B. For
each pair [X, Y] and task where both answers differ (`analysis.pairwise_verdicts.compared_pairs`)
it plans both orders — X's answer as A, then Y's — as two slots of the judging phase, keyed by
the task and the two answers' sha256 in the order shown (`PairwiseJudgeKey`): the engine's slots,
reservations, receipts and journal then send each once, as every other call. Two pairs whose
answers happen to be the same texts share their slots, as identical answers share a judge call.
A verdict stays in the journal (`outcomes.apply_result` stores nothing else); the analysis reads
it from there (`analysis.pairwise_verdicts`).
"""
from __future__ import annotations

from django.db import transaction

from experiments.analysis.pairwise_verdicts import compared_pairs, order_keys
from experiments.core.assembly import pairwise_judge_assembler
from experiments.core.canonical import sha256_text
from experiments.execution.planning import insert_slot_rows
from experiments.execution.planning_sql import share_the_run_row
from experiments.execution.policy import RunError
from experiments.models import Run, Slot
from experiments.models.runs import Phase


def pairwise_rows(run: Run) -> list[tuple]:
    """The judging phase's slot rows (as `planning.insert_slot_rows` takes them), both orders of each pair."""
    assemble_one = pairwise_judge_assembler()
    rows, seen = [], set()
    for _, _, task_id, x, y in compared_pairs(run.protocol.regrade_of, run.protocol.pairwise_pairs):
        for key, (first, second) in zip(order_keys(task_id, x, y), ((x, y), (y, x))):
            if key in seen:
                continue
            seen.add(key)
            assembled = assemble_one(x["question"], x["reference"], first["text"], second["text"])
            rows.append((key, task_id, None, assembled.system, assembled.user,
                         sha256_text(assembled.system + "\x00" + assembled.user),
                         [[ref.name, ref.sha256] for ref in assembled.prompt_refs]))
    return rows


def plan_pairwise_judging(run: Run) -> None:
    """The planner of a pairwise-judge run: nothing before judging (it starts there), then both
    orders of every compared pair; keys planned already are left alone (a re-plan adds nothing)."""
    if run.phase != Phase.JUDGING:
        return
    rows = pairwise_rows(run)
    with transaction.atomic():
        share_the_run_row(run.pk)
        insert_slot_rows(run.pk, Phase.JUDGING, Slot.Role.JUDGE, rows)


def checked_pairs(source: Run, pairs: list[list[str]], judge: dict) -> list[list[str]]:
    """The pairs, each [X, Y] in the protocol's condition order, once checked: two distinct
    conditions of the source run each, none listed twice, at least one task to compare. RunError
    with a message saying what to change otherwise."""
    order = list(source.protocol.conditions)
    out = []
    for pair in pairs:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or pair[0] == pair[1] \
                or any(c not in order for c in pair):
            raise RunError(f"{' vs '.join(map(str, pair))} is not a pair of two conditions of run {source.pk}")
        x, y = sorted(pair, key=order.index)
        if [x, y] in out:
            raise RunError(f"the pair {x} vs {y} is listed twice")
        out.append([x, y])
    if not out:
        raise RunError("choose at least one pair of conditions")
    if not compared_pairs(source, out):
        raise RunError("these pairs have no task where both answers differ: nothing to compare")
    if isinstance(judge, dict) and judge.get("structured_output") and judge.get("structured_format",
                                                                                "json_schema") == "json_schema":
        raise RunError("structured output holds a reply to the 0-3 grade's schema; a pairwise judge answers "
                       "A, B or tie: turn it off, or use the json_object form")
    return out


def all_pairs(order, conditions) -> list[list[str]]:
    """Every pair of `conditions`, each [X, Y] and the pairs in the protocol's condition `order`."""
    chosen = [c for c in order if c in set(conditions)]
    unknown = sorted(set(conditions) - set(order))
    if unknown:
        raise RunError(f"not a condition of this run: {', '.join(unknown)}")
    return [[x, y] for i, x in enumerate(chosen) for y in chosen[i + 1:]]
