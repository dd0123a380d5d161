"""A protocol's kind — interview, survey or re-grade — as it follows from what the protocol is made of. No Django.

A protocol stores its kind (`Protocol.kind`); this is the one rule that decides it while a protocol is
being built (the editor, the commands) and that the stored kind must agree with: a re-grade judges a
finished run again (it names the run), a survey protocol's conditions are survey conditions (keys
"survey:…"), every other protocol is about interviews.
"""
from __future__ import annotations

INTERVIEW, SURVEY, REGRADE = "interview", "survey", "regrade"
SURVEY_PREFIX = "survey:"


def has_survey_condition(conditions) -> bool:
    """Whether any condition key is a survey condition's (the kind a protocol's conditions imply)."""
    keys = conditions if isinstance(conditions, (list, tuple, dict)) else ()
    return any(isinstance(key, str) and key.startswith(SURVEY_PREFIX) for key in keys)


def inferred_kind(conditions, *, regrade: bool) -> str:
    """The kind of a protocol with these conditions, re-grading a run or not."""
    if regrade:
        return REGRADE
    return SURVEY if has_survey_condition(conditions) else INTERVIEW
