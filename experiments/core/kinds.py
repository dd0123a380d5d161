"""A protocol's kind — interview, survey, re-grade or pairwise judge — as it follows from what the protocol is made of.
No Django.

A protocol stores its kind (`Protocol.kind`); this is the one rule that decides it while a protocol is
being built (the editor, the commands) and that the stored kind must agree with: a re-grade judges a
finished run again (it names the run), a pairwise judge compares two conditions' answers of a
finished run (it names the run and the condition pairs), a survey protocol's conditions are survey conditions (keys
"survey:…"), every other protocol is about interviews.
"""
from __future__ import annotations

INTERVIEW, SURVEY, REGRADE, PAIRWISE = "interview", "survey", "regrade", "pairwise"
SURVEY_PREFIX = "survey:"


def has_survey_condition(conditions) -> bool:
    """Whether any condition key is a survey condition's (the kind a protocol's conditions imply)."""
    keys = conditions if isinstance(conditions, (list, tuple, dict)) else ()
    return any(isinstance(key, str) and key.startswith(SURVEY_PREFIX) for key in keys)


def inferred_kind(conditions, *, regrade: bool, pairwise: bool = False) -> str:
    """The kind of a protocol with these conditions, judging a run's answers again or not (one by
    one, or in pairs of conditions when `pairwise`)."""
    if regrade:
        return PAIRWISE if pairwise else REGRADE
    return SURVEY if has_survey_condition(conditions) else INTERVIEW
