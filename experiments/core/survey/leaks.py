"""The per-respondent leak check of App. H (and FORMAT.md §4, §7). No Django.

A respondent is usable only if
- the persona contains none of the target questions (no persona QuestionID among the wave-4
  QuestionIDs, and no persona question text equal to a target question text),
- none of the earlier answers to them (the rendered persona text quotes no target question),
- no question from the targets' survey blocks (no persona block name among the wave-4 ones), and
- the two wave-4 columns differ only in their answers.
Violations are reported per respondent and those respondents are excluded by the caller, never
silently: `split_leaks` returns both the clean respondents and the violations.
"""
from __future__ import annotations

from dataclasses import dataclass

from experiments.core.survey.records import Respondent


@dataclass(frozen=True)
class LeakViolation:
    pid: str
    kind: str  # "target-question", "target-text", "target-block", "instrument-differs"
    detail: str  # names the block and question

    def __str__(self) -> str:
        return f"respondent {self.pid}: {self.detail}"


def leak_violations(respondent: Respondent) -> list[LeakViolation]:
    """Every violation of the leak rules for one respondent (empty when clean)."""
    raise NotImplementedError


def split_leaks(respondents: list[Respondent]) -> tuple[list[Respondent], list[LeakViolation]]:
    """(respondents without violations, every violation of the others), order kept."""
    raise NotImplementedError
