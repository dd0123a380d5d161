"""A pairwise-judge run's answers and verdicts, read from the database.

What the judge compares: for each condition pair [X, Y] of the protocol (`Protocol.pairwise_pairs`)
and each task of the source run where both conditions have a final answer with different texts,
the two answers. The rule is the pairwise campaign's (`annotations.pairwise.pair_candidates`:
final answers with text, the first per task and condition), so the judge sees the items people
see. Its verdicts are the journal's: the reply of the call that settled each slot
(`journal_reads.settled_calls`; a late receipt of an earlier attempt never counts), parsed
(`parsers.parse_pairwise`); nothing else stores them. The numbers are `core.pairwise_judge`'s.
"""
from __future__ import annotations

from experiments.analysis.journal_reads import settled_calls
from experiments.core.conditions import FINAL
from experiments.core.llm.offline import OFFLINE_MODEL_VERSION
from experiments.core.pairwise_judge import JudgedPair, judge_rows
from experiments.core.parsers import parse_pairwise
from experiments.core.slot_keys import PairwiseJudgeKey
from experiments.core.stats.paired import DEFAULT_DRAWS, DEFAULT_SEED
from experiments.models import ModelCall, Prediction, Run
from experiments.models.runs import Phase


def final_answers(source: Run, conditions) -> dict[tuple[str, int], dict]:
    """(condition, task id) → {sha, text, question, reference, person} of each final answer with text."""
    answers: dict[tuple[str, int], dict] = {}
    rows = (Prediction.objects.filter(run=source, label=FINAL, condition__in=sorted(conditions),
                                      status=Prediction.Status.OK)
            .exclude(answer_sha256="").order_by("task_id", "pk")
            .values_list("task_id", "condition", "answer_sha256", "text", "task__question_turn__text",
                         "task__answer_turn__text", "task__session__person_id"))
    for task_id, condition, sha, text, question, reference, person in rows:
        answers.setdefault((condition, task_id), {"sha": sha, "text": text, "question": question,
                                                  "reference": reference, "person": person})
    return answers


def compared_pairs(source: Run, pairs: list[list[str]]) -> list[tuple[str, str, int, dict, dict]]:
    """(X, Y, task id, X's answer, Y's answer) of every pair and task where both answers differ,
    pair by pair in the protocol's order, tasks in id order."""
    answers = final_answers(source, {c for pair in pairs for c in pair})
    tasks = sorted({task_id for _, task_id in answers})
    out = []
    for x, y in pairs:
        for task_id in tasks:
            a, b = answers.get((x, task_id)), answers.get((y, task_id))
            if a is not None and b is not None and a["sha"] != b["sha"]:
                out.append((x, y, task_id, a, b))
    return out


def order_keys(task_id: int, a: dict, b: dict) -> tuple[str, str]:
    """The slot keys of the pair's two orders: X's answer shown as A, then Y's."""
    return (str(PairwiseJudgeKey(task_id=task_id, sha_a=a["sha"], sha_b=b["sha"])),
            str(PairwiseJudgeKey(task_id=task_id, sha_a=b["sha"], sha_b=a["sha"])))


def verdicts(run: Run) -> dict[str, str | None]:
    """Slot key → the parsed verdict (a, b, tie; None unparsed) of every settled pairwise slot: the reply of
    the call that settled it."""
    replies = settled_calls(ModelCall.objects.filter(slot__run=run, slot__phase=Phase.JUDGING,
                                                     slot__key__startswith=PairwiseJudgeKey.prefix())
                            ).values_list("slot__key", "text")
    return {key: parse_pairwise(text or "").preferred for key, text in replies}


def judged_pairs(run: Run) -> list[JudgedPair]:
    """Every compared pair of the run with its verdict in each order (None: none usable yet)."""
    got = verdicts(run)
    out = []
    for x, y, task_id, a, b in compared_pairs(run.protocol.regrade_of, run.protocol.pairwise_pairs):
        x_key, y_key = order_keys(task_id, a, b)
        out.append(JudgedPair(task=task_id, person=a["person"], x=x, y=y, x_as_a=got.get(x_key),
                              y_as_a=got.get(y_key)))
    return out


def stand_in(run: Run) -> bool:
    """Whether any verdict of the run came from the offline stand-in (pages say so)."""
    return ModelCall.objects.filter(run=run, model_version=OFFLINE_MODEL_VERSION).exists()


def bootstrap_of(run: Run) -> tuple[int, int]:
    bootstrap = run.protocol.bootstrap or {}
    return int(bootstrap.get("seed", DEFAULT_SEED)), int(bootstrap.get("draws", DEFAULT_DRAWS))


def pairwise_summary(run: Run) -> dict:
    """The run's analysis: per condition pair the judge's win rates, position bias and consistency."""
    seed, draws = bootstrap_of(run)
    return {"pairwise_judge": {"rows": judge_rows(judged_pairs(run), seed=seed, draws=draws),
                               "seed": seed, "draws": draws, "stand_in": stand_in(run),
                               "source_run": run.protocol.regrade_of_id}}
