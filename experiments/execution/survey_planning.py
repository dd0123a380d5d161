"""Survey runs through the same engine (paper App. E "Twin-2K-500 answering", App. H).

A protocol whose conditions are survey conditions (`core.survey.prompt.SURVEY_CONDITIONS`, keys
"survey:…") over a survey sample (a cohort without tasks) plans:
- memories: one call per respondent when a condition needs the memory (the concrete-memory prompt
  unchanged, applied to the whole persona), slot key `survey-memory|<respondent>`;
- generation: one answer call per respondent and condition, slot key `survey|<respondent>|<condition>`;
  a condition whose memory is missing gets a missing answer and no call;
- no decisions and no judging: answers are scored against the recorded options by the core.
A protocol with `survey_screener` off (Table 21's earlier runs) sends every condition's prompt without
the screener (`core.survey.prompt.NO_SCREENER_USER_PROMPTS`); its seal records the option and those prompts.
Each answer is parsed per item (`core.survey.answers`) and stored with its problems, never redrawn.
"""
from __future__ import annotations

import dataclasses

from django.db import transaction

from experiments.core.canonical import canonical_json, sha256_text
from experiments.core.kinds import SURVEY_PREFIX
from experiments.core.slot_keys import SurveyAnswerKey, SurveyMemoryKey, parse_slot_key
from experiments.core.survey.answers import parse_survey_answer
from experiments.core.survey.ownwords import survey_ownwords, whole_persona
from experiments.core.survey.prompt import (
    SCREENER_ONLY, SURVEY_CONDITIONS, SYSTEM_PROMPT, assemble_survey, assemble_survey_memory,
    assemble_survey_no_screener, get_survey_condition, user_prompt_name,
)
from experiments.core.survey.screener import screener_text
from experiments.core.survey.targets import target_items
from experiments.models import Run, Slot, SurveyAnswer, SurveyItem, SurveyMemory, SurveyRespondent
from experiments.models.runs import Phase
from experiments.data.surveys import (
    is_survey_cohort, respondent_record, sample_list_sha256, sample_persona_lengths, sample_respondents,
)


def is_survey_slot(slot: Slot) -> bool:
    return slot.key.startswith((SurveyMemoryKey.prefix(), SurveyAnswerKey.prefix()))


# --- sealing ----------------------------------------------------------------------------------------

def survey_prompt_names(protocol) -> list[str]:
    names = {SYSTEM_PROMPT}
    for key in protocol.conditions:
        if key in SURVEY_CONDITIONS:
            condition = SURVEY_CONDITIONS[key]
            names.add(user_prompt_name(key, screener=protocol.survey_screener))
            if condition.needs_memory:
                names.update(("memory_concrete_system", "memory_concrete_user"))
    return sorted(names)


def survey_condition_spec(key: str) -> str:
    condition = SURVEY_CONDITIONS.get(key)
    return canonical_json(dataclasses.asdict(condition)) if condition else "unknown condition"


def survey_settings(protocol) -> dict:
    """What a survey protocol adds to its sealed settings: the screener option, only when it is off
    (so the settings of every protocol that shows the screener hash as before)."""
    if protocol.kind == protocol.Kind.SURVEY and not protocol.survey_screener:
        return {"survey_screener": False}
    return {}


def survey_list_sha256(cohort) -> str:
    return sample_list_sha256(cohort)


def survey_problems(protocol) -> list[str]:
    """Why a survey protocol cannot be sealed (the model settings are checked by the caller)."""
    problems = ["a condition is listed twice"] if len(set(protocol.conditions)) != len(protocol.conditions) else []
    if not is_survey_cohort(protocol.cohort):
        problems.append(f"the cohort {protocol.cohort.name!r} is an interview cohort; a survey protocol needs a "
                        "survey sample")
    elif not protocol.cohort.survey_members.exists():
        problems.append(f"the survey sample {protocol.cohort.name!r} has no respondents")
    for key in protocol.conditions:
        if key not in SURVEY_CONDITIONS:
            problems.append(f"{key!r} is not a survey condition; a protocol is about interviews or about a survey, "
                            "never both" if not str(key).startswith(SURVEY_PREFIX) else f"unknown condition {key!r}")
    return problems


# --- planning ---------------------------------------------------------------------------------------

def _slot(run, phase, key, messages) -> Slot:
    return Slot(run=run, phase=phase, key=key, role=Slot.Role.GENERATOR, system=messages.system,
                user=messages.user, request_sha256=sha256_text(messages.system + "\x00" + messages.user),
                prompt_refs=[[ref.name, ref.sha256] for ref in messages.prompts])


def _conditions(run: Run):
    return [get_survey_condition(key) for key in run.protocol.conditions]


def plan_survey_memories(run: Run) -> None:
    if not any(c.needs_memory for c in _conditions(run)):
        return
    slots = [_slot(run, Phase.MEMORIES, str(SurveyMemoryKey(respondent_id=r.pk)),
                   assemble_survey_memory(r.persona_text)) for r in sample_respondents(run.protocol.cohort)]
    Slot.objects.bulk_create(slots, ignore_conflicts=True)


def plan_survey_generation(run: Run) -> None:
    memories = {m.respondent_id: m.text for m in SurveyMemory.objects.filter(run=run)}
    slots, answers = [], []
    for row in sample_respondents(run.protocol.cohort):
        respondent = respondent_record(row)
        items = target_items(respondent)
        screener = screener_text(respondent)
        for condition in _conditions(run):
            memory = memories.get(row.pk)
            if condition.needs_memory and not memory:
                answers.append(SurveyAnswer(run=run, respondent=row, condition=condition.key,
                                            status=SurveyAnswer.Status.MISSING, error="memory missing"))
                continue
            evidence = {}
            if "memory" in condition.evidence:
                evidence["memory"] = memory
            if "excerpts" in condition.evidence:
                evidence["excerpts"] = survey_ownwords(respondent, len(memory), items)
            if "persona" in condition.evidence:
                evidence["persona"] = whole_persona(respondent)
            if run.protocol.survey_screener:
                messages = assemble_survey(condition.key, items, screener=screener, **evidence)
            else:
                messages = assemble_survey_no_screener(condition.key, items, **evidence)
            slot = _slot(run, Phase.GENERATION, str(SurveyAnswerKey(respondent_id=row.pk, condition=condition.key)), messages)
            slots.append(slot)
            answers.append(SurveyAnswer(run=run, respondent=row, condition=condition.key, slot=slot,
                                        evidence_chars=sum(len(v) for v in evidence.values())))
    with transaction.atomic():
        Slot.objects.bulk_create(slots, ignore_conflicts=True)
        by_key = dict(Slot.objects.filter(run=run, phase=Phase.GENERATION).values_list("key", "pk"))
        for answer in answers:
            if answer.slot is not None:
                answer.slot_id = by_key[answer.slot.key]
        SurveyAnswer.objects.bulk_create(answers, ignore_conflicts=True)


def plan_nothing(run: Run) -> None:
    """Decisions and judging: a survey answer is scored against the recorded option, no judge."""


SURVEY_PLANNERS = {
    Phase.MEMORIES: plan_survey_memories,
    Phase.GENERATION: plan_survey_generation,
    Phase.DECISIONS: plan_nothing,
    Phase.JUDGING: plan_nothing,
}


# --- outcomes ---------------------------------------------------------------------------------------

def apply_survey_result(slot: Slot, text: str | None) -> None:
    """A memory, or an answer parsed per item (problems recorded, nothing redrawn)."""
    key = parse_slot_key(slot.key)
    if isinstance(key, SurveyMemoryKey):
        SurveyMemory.objects.update_or_create(run_id=slot.run_id, respondent_id=key.respondent_id,
                                              defaults={"text": text or None, "slot": slot})
        return
    answers = SurveyAnswer.objects.filter(slot=slot)
    if text is None:
        answers.update(status=SurveyAnswer.Status.MISSING, error="no usable response", items=[], extra=[])
        return
    counts = [len(options) for options in SurveyItem.objects.filter(respondent_id=key.respondent_id)
              .order_by("number").values_list("options", flat=True)]
    parsed = parse_survey_answer(text, counts)
    answers.update(status=SurveyAnswer.Status.OK, error=parsed.error or "",
                   items=[[a.option, a.problem, a.raw] for a in parsed.items], extra=list(parsed.extra))


# --- expected calls -----------------------------------------------------------------------------

MEMORY_CHARS = 6 * 100  # a memory of about 100 words, as the interview estimate counts them
# Respondents whose prompts the estimate builds, spread evenly over the sample: their items (80 or
# 84) and screeners differ, and rebuilding every respondent of a 400-person sample would make the
# protocol page slow (a few milliseconds each).
ESTIMATE_SPREAD = 25


def estimate_spread(rows: list, size: int = ESTIMATE_SPREAD) -> list:
    """Up to `size` of `rows`, evenly spread from the first to the last (all of them when fewer)."""
    n = len(rows)
    if n <= size:
        return list(rows)
    if size == 1:
        return [rows[0]]
    return [rows[round(i * (n - 1) / (size - 1))] for i in range(size)]


def survey_estimate(protocol, output_cap: int) -> dict | None:
    """The expected calls of one survey run (exact) and its input tokens (characters / 4: the
    screener-only prompt with the items (without the screener when the protocol shows none), averaged over respondents spread evenly over the sample
    (`estimate_spread`), plus each condition's evidence at the sample's mean persona length and a
    100-word memory), in the shape of estimate_block.html."""
    if not is_survey_cohort(protocol.cohort):
        return None
    conditions = [SURVEY_CONDITIONS[k] for k in protocol.conditions if k in SURVEY_CONDITIONS]
    lengths = sample_persona_lengths(protocol.cohort)
    if not conditions or not lengths:
        return None
    n = len(lengths)
    persona = sum(chars for _, chars in lengths) / n
    spread_ids = [respondent_id for respondent_id, _ in estimate_spread(lengths)]
    stored = SurveyRespondent.objects.in_bulk(spread_ids)
    spread = [respondent_record(stored[respondent_id]) for respondent_id in spread_ids]
    prompts, overheads = [], []
    for respondent in spread:
        items = target_items(respondent)
        asked = (assemble_survey(SCREENER_ONLY, items, screener=screener_text(respondent)) if protocol.survey_screener
                 else assemble_survey_no_screener(SCREENER_ONLY, items))
        prompts.append(len(asked.system) + len(asked.user))
        memory_call = assemble_survey_memory(respondent.persona_text)
        overheads.append(len(memory_call.system) + len(memory_call.user) - len(respondent.persona_text))
    base, memory_prompt = sum(prompts) / len(spread), sum(overheads) / len(spread)
    evidence = {"memory": MEMORY_CHARS, "excerpts": MEMORY_CHARS, "persona": persona}
    phases = []
    if any(c.needs_memory for c in conditions):
        phases.append({"phase": "memories", "calls": n, "input_tokens": round(n * (persona + memory_prompt) / 4),
                       "output_cap_tokens": n * output_cap, "notes": ["one per respondent"]})
    answer_chars = sum(base + sum(evidence[e] for e in c.evidence) for c in conditions)
    phases.append({"phase": "answers", "calls": n * len(conditions), "input_tokens": round(n * answer_chars / 4),
                   "output_cap_tokens": n * len(conditions) * output_cap,
                   "notes": ["one per respondent and condition; no judge",
                             f"prompt lengths averaged over {len(spread)} respondents spread over the sample"]})
    return {"phases": phases, "calls": sum(p["calls"] for p in phases),
            "input_tokens": sum(p["input_tokens"] for p in phases),
            "output_cap_tokens": sum(p["output_cap_tokens"] for p in phases)}
