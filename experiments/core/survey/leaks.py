"""The per-respondent leak check of App. H (and FORMAT.md §4, §7). No Django.

A respondent is usable only if
- the persona contains none of the target questions: no persona QuestionID among the wave-4
  QuestionIDs, and no persona question whose text is a target question's text;
- none of the earlier answers to them: no line of the released persona text is a target
  question's text (the rendering gives each question text a line, its answer the lines after);
- no question from the targets' survey blocks: no persona block name among the wave-4 ones
  (names compared stripped, as the real names end in spaces);
- the two wave-4 columns differ only in their answers (blocks, order, QuestionIDs, texts,
  options, rows and ranges all equal).
Violations are reported per respondent and the caller excludes those respondents, never silently:
`split_leaks` returns both the clean respondents and every violation of the others.

Texts are compared after `lines.clean_text`; texts shorter than MIN_QUOTED_CHARS ("Choose
between:") are too generic to count as a quotation of the question.
"""
from __future__ import annotations

from dataclasses import dataclass

from experiments.core.survey.lines import clean_text
from experiments.core.survey.records import Respondent

MIN_QUOTED_CHARS = 30


@dataclass(frozen=True)
class LeakViolation:
    pid: str
    kind: str  # "target-question", "target-text", "target-block", "instrument-differs"
    detail: str  # names the block and question

    def __str__(self) -> str:
        return f"respondent {self.pid}: {self.detail}"


def leak_violations(respondent: Respondent) -> list[LeakViolation]:
    """Every violation of the leak rules for one respondent (empty when clean)."""
    pid = respondent.pid
    found: list[LeakViolation] = []
    target_qids = {q.qid: b.name for b in respondent.wave4 for q in b.questions}
    target_blocks = {b.name for b in respondent.wave4}
    target_texts = {}
    for b in respondent.wave4:
        for q in b.questions:
            text = clean_text(q.text)
            if len(text) >= MIN_QUOTED_CHARS:
                target_texts.setdefault(text, (b.name, q.qid))
    for b in respondent.persona:
        where = f"persona block {b.index + 1} {b.name!r}"
        if b.name in target_blocks:
            found.append(LeakViolation(pid, "target-block", f"{where} is the target survey block {b.name!r}"))
        for q in b.questions:
            if q.qid in target_qids:
                found.append(LeakViolation(pid, "target-question", f"{where} question {q.index + 1} is the target "
                                                                   f"question {q.qid} of block {target_qids[q.qid]!r}"))
            elif clean_text(q.text) in target_texts:
                block, qid = target_texts[clean_text(q.text)]
                found.append(LeakViolation(pid, "target-text", f"{where} question {q.index + 1} ({q.qid}) has the "
                                                               f"text of target question {qid} of block {block!r}"))
    persona_lines = {clean_text(line) for line in respondent.persona_text.split("\n")
                     if len(line) >= MIN_QUOTED_CHARS}
    for text, (block, qid) in target_texts.items():
        if text in persona_lines:
            found.append(LeakViolation(pid, "target-text", f"the persona text quotes target question {qid} "
                                                           f"of block {block!r}"))
    found.extend(_instrument_differences(respondent))
    return found


def _instrument_differences(respondent: Respondent) -> list[LeakViolation]:
    pid = respondent.pid
    earlier, wave4 = respondent.earlier, respondent.wave4
    if len(earlier) != len(wave4):
        return [LeakViolation(pid, "instrument-differs", f"the wave-4 columns have {len(earlier)} and "
                                                         f"{len(wave4)} blocks")]
    found = []
    for a, b in zip(earlier, wave4):
        where = f"wave-4 block {b.index + 1} {b.name!r}"
        if a.raw_name != b.raw_name or len(a.questions) != len(b.questions):
            found.append(LeakViolation(pid, "instrument-differs", f"{where} differs between the two wave-4 "
                                                                  "columns (name or number of questions)"))
            continue
        for qa, qb in zip(a.questions, b.questions):
            if qa.shape() != qb.shape():
                found.append(LeakViolation(pid, "instrument-differs", f"{where} question {qb.index + 1} {qb.qid} "
                                                                      "differs between the two wave-4 columns "
                                                                      "in more than its answers"))
    return found


def split_leaks(respondents: list[Respondent]) -> tuple[list[Respondent], list[LeakViolation]]:
    """(respondents without violations, every violation of the others), order kept."""
    clean, violations = [], []
    for respondent in respondents:
        found = leak_violations(respondent)
        if found:
            violations.extend(found)
        else:
            clean.append(respondent)
    return clean, violations
