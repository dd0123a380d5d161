"""Interview files: what a session is (`records`) and the readers of each format (`readers`).

Re-exports for notebooks and tests; code inside the project imports the defining module.
"""
from experiments.core.interviews.readers import (
    FORMATS, GENAGENTS_FILES, guess_format, parse_anthropic_csv, parse_genagents, parse_jsonl, parse_text,
    read_interview_path, split_anthropic_transcript, stream_binary, stream_interview_path,
)
from experiments.core.interviews.streams import SessionStream
from experiments.core.interviews.records import (
    INTERVIEWER, PARTICIPANT, SPEAKERS, TURN_MAX_CHARS, InterviewFileError, ParsedSession, ParsedTurn, Problem,
    decode_utf8, unstorable_text_problem,
)

__all__ = [
    "FORMATS", "GENAGENTS_FILES", "INTERVIEWER", "PARTICIPANT", "SPEAKERS", "TURN_MAX_CHARS",
    "InterviewFileError", "ParsedSession", "ParsedTurn", "Problem", "decode_utf8", "guess_format",
    "parse_anthropic_csv", "parse_genagents", "parse_jsonl", "parse_text", "read_interview_path",
    "split_anthropic_transcript", "SessionStream", "stream_binary", "stream_interview_path",
    "unstorable_text_problem",
]
