"""The offline stand-in: deterministic answers, decisions and grades without any network.

A demo and test double for the model services of the paper's App. B.2/B.3, never a model
result: its model version is ``OFFLINE_MODEL_VERSION`` and every grade rationale starts with
``OFFLINE_LABEL``, so pages can say so (docs/design.md §7).

It receives exactly the (system, user) messages a real model would get and finds what it needs
by the bracketed section headings of prompts/*.txt (``[QUESTION]``, ``[ACTUAL ANSWER]``,
``[PREDICTED ANSWER]``, ``[DECISION TASK]``, ``[ANONYMOUS CANDIDATES]``, ``[TASK]`` and the
evidence blocks). Prompt wording may change, so parsing is tolerant: any heading containing
QUESTION/PREDICT/ACTUAL or REFERENCE/... is recognised, and a message without headings is used
whole. What it does, by the request it recognises:

- judge (a PREDICTED heading): Dice overlap of the content words of prediction and reference on
  fixed thresholds gives a 0-3 score; ``{"score": n, "rationale": "offline stand-in: shared
  words: ..."}`` names the shared words;
- pairwise judge (ANSWER A and ANSWER B headings): the answer whose content words overlap the
  reference's more (Dice), a tie when equal, ``{"preferred": "A", "rationale": "offline stand-in: ..."}``;
- selection (a decision asking for ``candidate_id``): the candidate sharing the most content
  words with question and evidence, ``{"candidate_id": "c2"}``; ties go to the first displayed;
- archive queries (a task asking for ``"queries"``): the question's content words as one query;
- tag choice (a task asking for ``"tags"`` under a VOCABULARY heading): the vocabulary's first six labels;
- labels (a task asking for "one label per line"): the record's first eight content words, one per line;
- memory writing (a task asking for "about N words", no question): the record's first sentences
  up to N words;
- survey answering (a SURVEY QUESTIONS heading, App. E "Twin-2K-500 answering"): per numbered
  item the option sharing the most content words with the evidence blocks (ties to the first),
  as the JSON object the prompt asks for;
- answering, and fusion: the evidence (and candidate) sentences sharing the most content words
  with the question, in their original order, at most ``ANSWER_WORD_CAP`` words.

Imports no Django.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

OFFLINE_LABEL = "offline stand-in"
OFFLINE_MODEL_VERSION = "offline-stand-in-1"
ANSWER_WORD_CAP = 60
DEFAULT_MEMORY_WORDS = 100
FALLBACK_ANSWER = "I don't know."

# Dice overlap of content words at or above a threshold earns that grade (3, 2, 1); below the
# last, 0. Fixed so that grades are reproducible across runs and machines.
GRADE_THRESHOLDS = ((0.5, 3), (0.25, 2), (0.1, 1))

# A small English function-word list, enough to keep "the", "and", "you" from counting as shared
# content. Independent of the evidence builders' list on purpose: this is only a stand-in.
STOP_WORDS = frozenset(
    """a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing don down during each few for from
    further had has have having he her here hers him his how i if in into is it its itself just
    me more most my no nor not now of off on once only or other our ours out over own same she
    should so some such than that the their theirs them then there these they this those through
    to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yeah like really um uh oh well get got thing things kind sort
    lot lots think know mean going go""".split()
)

# A heading is a bracketed run of capitals at the start of a line, optionally with a lower-case
# gloss after a comma ("[EARLIER IN THE INTERVIEW, verbatim]"). Requiring capitals keeps
# transcript tags such as "[Participant]" and the candidates' JSON array out.
_HEADING = re.compile(r"^\[([A-Z0-9][A-Z0-9 &/'_.-]+)(?:,[^\]\n]*)?\][ \t]*", re.MULTILINE)
# The prompts close a block with an instruction paragraph that has no heading of its own
# ("Answer as this participant would...", "Step 1: ..."); it is not part of the block's data.
_CLOSING_INSTRUCTION = re.compile(r"\n[ \t]*\n(?=(?:Step 1\b|Answer as |Return only ))")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_BULLET = re.compile(r"^\s*(?:[-*•]\s+|\d+[.)]\s+)")
_REQUESTED_WORDS = re.compile(r"about (\d+) words")
_GRADING_SYSTEM = re.compile(r"\b(grade|grading|judge)\b", re.IGNORECASE)
# Blocks that instruct rather than describe the participant: never quoted back as an answer.
_NOT_EVIDENCE = ("DECISION", "CANDIDATES", "TASK", "INSTRUCTION")
# What the prompts put in a block that has nothing (evidence.NO_SCREENER): a mark, not evidence.
_EMPTY_BLOCK = "(none)"

Sections = list[tuple[str, str]]


def offline_reply(system: str, user: str) -> str:
    """The stand-in's output text for one request (see the module docstring)."""
    sections = split_sections(user)
    headings = [heading for heading, _ in sections]
    has_headings = any(headings)
    if "ANSWER A" in headings and "ANSWER B" in headings:  # whole headings: "ANSWERS BY …" is evidence
        return offline_pairwise(sections)
    if _find(headings, "PREDICT") is not None or (
        not has_headings and _GRADING_SYSTEM.search(system)
    ):
        return offline_grade(sections)
    decision_at = _find(headings, "DECISION")
    candidates = _candidates(sections)
    if candidates and decision_at is not None and "candidate_id" in sections[decision_at][1]:
        return offline_select(sections, candidates)
    if (survey_at := _find(headings, "SURVEY QUESTIONS")) is not None:
        return offline_survey(sections, survey_at)
    task_at = _find(headings, "TASK")
    task = sections[task_at][1] if task_at is not None and task_at != decision_at else ""
    if '"queries"' in task:
        question, _ = _question_and_evidence(sections)
        return json.dumps({"queries": [" ".join(content_words(question)[:8])]})
    if '"tags"' in task and (vocabulary_at := _find(headings, "VOCABULARY")) is not None:
        return offline_tags(sections, vocabulary_at)
    if "one label per line" in task:
        _, evidence_texts = _question_and_evidence(sections)
        return "\n".join(content_words(" ".join(evidence_texts))[:8]) or FALLBACK_ANSWER
    if (words := _REQUESTED_WORDS.search(task)) and not any(map(_is_question_heading, headings)):
        return offline_memory(sections, int(words.group(1)))
    return offline_answer(sections, extra_evidence=[answer for _, answer in candidates])


_SURVEY_ITEM = re.compile(r"^(\d+)\. .*?^   Options: (.*)$", re.MULTILINE | re.DOTALL)
_SURVEY_OPTION = re.compile(r"(\d+) = (.*?)(?=; \d+ = |$)")


def offline_tags(sections: Sections, vocabulary_at: int) -> str:
    """``{"tags": [...]}``: the first six labels of the vocabulary (App. K's tag choice)."""
    labels = [line.strip() for line in sections[vocabulary_at][1].splitlines() if line.strip()]
    return json.dumps({"tags": labels[:6]})


def offline_survey(sections: Sections, survey_at: int) -> str:
    """Every survey item answered by the option whose words the evidence shares most."""
    evidence = set()
    for index, (heading, body) in enumerate(sections):
        if index != survey_at and "RESPONSE" not in heading:
            evidence.update(content_words(body))
    answers = {}
    for block in re.split(r"\n\s*\n", sections[survey_at][1]):
        item = _SURVEY_ITEM.search(block)
        if item is None:
            continue
        options = [(int(n), len(evidence.intersection(content_words(text))))
                   for n, text in _SURVEY_OPTION.findall(item.group(2))]
        if options:
            answers[item.group(1)] = max(options, key=lambda option: (option[1], -option[0]))[0]
    return json.dumps(answers)


def split_sections(user: str) -> Sections:
    """[(HEADING, body)] in order; text before the first heading gets the heading ""."""
    matches = list(_HEADING.finditer(user))
    if not matches:
        return [("", user.strip())] if user.strip() else []
    sections = []
    preamble = user[: matches[0].start()].strip()
    if preamble:
        sections.append(("", preamble))
    for match, following in zip(matches, [*matches[1:], None]):
        body = user[match.end() : following.start() if following else len(user)]
        body = _CLOSING_INSTRUCTION.split(body, maxsplit=1)[0]
        sections.append((match.group(1).strip(), body.strip()))
    return sections


def content_words(text: str) -> list[str]:
    """Lower-cased words that are not stop words, in order of first appearance, no repeats."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word not in STOP_WORDS and len(word) > 1:
            seen.setdefault(word, None)
    return list(seen)


def offline_answer(sections: Sections, extra_evidence: Sequence[str] = ()) -> str:
    """The evidence sentences that best match the question's content words (≤ 60 words)."""
    question, evidence_texts = _question_and_evidence(sections)
    sentences = [s for text in [*evidence_texts, *extra_evidence] for s in _sentences(text)]
    # Interviewer questions inside a transcript show the topic; they are not answers to repeat.
    sentences = [s for s in sentences if not s.endswith("?") and s != question]
    if not sentences:
        return FALLBACK_ANSWER
    wanted = set(content_words(question))
    overlap = [len(wanted.intersection(content_words(s))) for s in sentences]
    ranked = sorted(range(len(sentences)), key=lambda i: (-overlap[i], i))
    if overlap[ranked[0]] == 0:
        ranked = ranked[:1]  # nothing matches: the first evidence sentence, as a plain guess
    chosen: list[int] = []
    words_used = 0
    for index in ranked:
        if chosen and overlap[index] == 0:
            break
        length = len(sentences[index].split())
        if words_used + length > ANSWER_WORD_CAP:
            if chosen:
                continue
            return " ".join(sentences[index].split()[:ANSWER_WORD_CAP])
        chosen.append(index)
        words_used += length
    return " ".join(sentences[i] for i in sorted(chosen))


def offline_select(sections: Sections, candidates: list[tuple[str, str]]) -> str:
    """``{"candidate_id": ...}``: the candidate sharing most words with question and evidence."""
    question, evidence_texts = _question_and_evidence(sections)
    context = set(content_words(" ".join([question, *evidence_texts])))
    best_id, best_overlap = candidates[0][0], -1
    for candidate_id, answer in candidates:
        overlap = len(context.intersection(content_words(answer)))
        if overlap > best_overlap:
            best_id, best_overlap = candidate_id, overlap
    return json.dumps({"candidate_id": best_id})


def offline_memory(sections: Sections, words: int = DEFAULT_MEMORY_WORDS) -> str:
    """The record's sentences in order, up to the requested number of words."""
    _, evidence_texts = _question_and_evidence(sections)
    kept: list[str] = []
    for sentence in (s for text in evidence_texts for s in _sentences(text)):
        if kept and len(" ".join([*kept, sentence]).split()) > words:
            break
        kept.append(sentence)
    return " ".join(" ".join(kept).split()[:words]) or FALLBACK_ANSWER


def offline_grade(sections: Sections) -> str:
    """``{"score": 0..3, "rationale": "offline stand-in: shared words: ..."}``."""
    headings = [heading for heading, _ in sections]
    prediction_at = _find(headings, "PREDICT")
    reference_at = _find(headings, "ACTUAL", "REFERENCE")
    if prediction_at is None or reference_at is None:
        rationale = f"{OFFLINE_LABEL}: predicted or reference answer not found"
        return json.dumps({"score": 0, "rationale": rationale})
    predicted = content_words(sections[prediction_at][1])
    reference = content_words(sections[reference_at][1])
    shared = sorted(set(reference).intersection(predicted))
    dice = 2 * len(shared) / (len(predicted) + len(reference)) if predicted and reference else 0.0
    score = next((grade for threshold, grade in GRADE_THRESHOLDS if dice >= threshold), 0)
    rationale = (
        f"{OFFLINE_LABEL}: shared words: {', '.join(shared) or 'none'} (overlap {dice:.2f})"
    )
    return json.dumps({"score": score, "rationale": rationale})


def _dice(answer: str, reference: str) -> float:
    """Dice overlap of the content words of an answer and the reference (0 when either has none)."""
    answer_words, reference_words = content_words(answer), content_words(reference)
    shared = set(reference_words).intersection(answer_words)
    return 2 * len(shared) / (len(answer_words) + len(reference_words)) if answer_words and reference_words else 0.0


def offline_pairwise(sections: Sections) -> str:
    """``{"preferred": "A"|"B"|"tie", "rationale": "offline stand-in: ..."}``: the answer whose
    content words overlap the reference's more (Dice), a tie when equal. It never looks at the side,
    so the stand-in has no position bias by construction."""
    headings = [heading for heading, _ in sections]
    reference_at = _find(headings, "ACTUAL", "REFERENCE")
    reference = sections[reference_at][1] if reference_at is not None else ""
    a = _dice(sections[headings.index("ANSWER A")][1], reference)
    b = _dice(sections[headings.index("ANSWER B")][1], reference)
    preferred = "A" if a > b else "B" if b > a else "tie"
    return json.dumps({"preferred": preferred, "rationale": f"{OFFLINE_LABEL}: overlap A {a:.2f}, B {b:.2f}"})


def _find(headings: list[str], *needles: str) -> int | None:
    """Index of the last heading containing any of the needles."""
    for index in range(len(headings) - 1, -1, -1):
        if any(needle in headings[index] for needle in needles):
            return index
    return None


def _is_question_heading(heading: str) -> bool:
    # "[SCREENER Q&A]" holds evidence, not the question being asked.
    return "QUESTION" in heading and "SCREENER" not in heading


def _question_and_evidence(sections: Sections) -> tuple[str, list[str]]:
    """The question being asked, and the blocks that may be quoted back as the answer."""
    question_at = None
    for index, (heading, _) in enumerate(sections):
        if _is_question_heading(heading):
            question_at = index
    evidence = [
        body
        for index, (heading, body) in enumerate(sections)
        if index != question_at and not any(word in heading for word in _NOT_EVIDENCE) and body != _EMPTY_BLOCK
    ]
    if question_at is not None:
        return sections[question_at][1], evidence
    # No heading names the question: take the last line that asks one, and quote the rest.
    lines = [line.strip() for text in evidence for line in text.splitlines() if line.strip()]
    asked = [line for line in lines if line.endswith("?")]
    return (asked[-1] if asked else " ".join(lines)), evidence


def _sentences(text: str) -> list[str]:
    sentences = []
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip()
        sentences.extend(part.strip() for part in _SENTENCE_END.split(line) if part.strip())
    return sentences


def _candidates(sections: Sections) -> list[tuple[str, str]]:
    """[(candidate_id, answer)] from the JSON array under a CANDIDATES heading, in display order."""
    at = _find([heading for heading, _ in sections], "CANDIDATES")
    if at is None:
        return []
    body = sections[at][1]
    try:
        items = json.loads(body[body.index("[") : body.rindex("]") + 1])
    except ValueError:
        return []
    if not isinstance(items, list):
        return []
    return [
        (str(item["candidate_id"]), str(item.get("answer", "")))
        for item in items
        if isinstance(item, dict) and "candidate_id" in item
    ]
