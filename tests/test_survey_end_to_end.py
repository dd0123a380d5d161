"""The survey core end to end against the tests' local LLM server, without Django: the memory
call, OwnWords at |memory|, one answer call per respondent and condition over real HTTP, the parser,
the scores and a contrast. The server answers from what it is sent, so the prompt must carry the items."""
import json
import re

import httpx
import pytest

from experiments.core.llm.client import send
from experiments.core.llm.wire import ModelConfig, OutcomeKind, build_request
from experiments.core.survey.answers import parse_survey_answer
from experiments.core.survey.leaks import split_leaks
from experiments.core.survey.ownwords import survey_ownwords, whole_persona
from experiments.core.survey.prompt import (
    MEMORY, OWNWORDS, SCREENER_ONLY, SURVEY_CONDITIONS, WHOLE_PERSONA, assemble_survey, assemble_survey_memory,
)
from experiments.core.survey.reader import read_survey_path
from experiments.core.survey.scores import human_retest_scores, score_items, summarize, survey_contrasts
from experiments.core.survey.screener import screener_text
from experiments.core.survey.targets import target_items
from tests.llm_fake_server import Reply, answer, running_fake_llm
from tests.survey_helpers import SAMPLE

MEMORY_TEXT = "Prefers plan A, buys cheap products, supports most policies; cautious with money."
ITEM = re.compile(r"^(\d+)\. .*?\n(?:   Statement: .*\n)?   Options: (.*)$", re.MULTILINE)


def reply_from_prompt(request):
    """A stand-in respondent: each numbered item of the prompt gets its last option (the first on a
    two-option item when the prompt shows excerpts); a memory call gets a memory."""
    user = request.json["messages"][-1]["content"]
    if "[SURVEY QUESTIONS]" not in user:
        return answer(request, MEMORY_TEXT)
    chosen = {}
    for number, options in ITEM.findall(user):
        count = options.count(" = ")
        chosen[number] = 1 if ("[RETRIEVED ANSWERS" in user and count == 2) else count
    total = int(re.search(r"Answer all (\d+) numbered items", user).group(1))
    assert len(chosen) == total
    return answer(request, json.dumps(chosen))


@pytest.fixture(scope="module")
def run():
    respondents, violations = split_leaks(read_survey_path(SAMPLE)[:4])
    assert violations == []
    results = {"sent": [], "scores": {key: [] for key in (SCREENER_ONLY, MEMORY, OWNWORDS, WHOLE_PERSONA)},
               "human": []}
    with running_fake_llm() as server, httpx.Client(trust_env=False) as client:
        config = ModelConfig(provider="openai", base_url=server.openai_base_url, model="gpt-test-1",
                             max_output_tokens=800, reasoning="minimal", timeout_s=10)

        def call(messages):
            server.script(Reply(body=reply_from_prompt))
            outcome = send(config, build_request(config, messages.system, messages.user), client=client)
            assert outcome.kind == OutcomeKind.OK, outcome.error
            sent = server.requests[-1].json["messages"]
            results["sent"].append((messages, sent))
            return outcome.text

        for respondent in respondents:
            items = target_items(respondent)
            screener = screener_text(respondent)
            memory = call(assemble_survey_memory(whole_persona(respondent)))
            evidence = {SCREENER_ONLY: {}, MEMORY: {"memory": memory},
                        OWNWORDS: {"excerpts": survey_ownwords(respondent, len(memory), items)},
                        WHOLE_PERSONA: {"persona": whole_persona(respondent)}}
            for key, fields in evidence.items():
                text = call(assemble_survey(key, items, screener=screener, **fields))
                parsed = parse_survey_answer(text, [len(i.options) for i in items])
                assert parsed.error is None and parsed.answered == len(items)
                results["scores"][key] += score_items(respondent.pid, items, [a.option for a in parsed.items])
            results["human"] += human_retest_scores(respondent.pid, items)
    results["items"] = {r.pid: target_items(r) for r in respondents}
    return results


def test_the_messages_arrive_byte_for_byte(run):
    assert len(run["sent"]) == 4 * 5  # a memory and four answer calls per respondent
    for messages, sent in run["sent"]:
        assert [m["role"] for m in sent] == ["system", "user"]
        assert (sent[0]["content"], sent[1]["content"]) == (messages.system, messages.user)


def test_the_memory_feeds_the_budget_and_the_prompts(run):
    memory_prompts = [m for m, _ in run["sent"] if "[A DESCRIPTION OF THIS RESPONDENT]" in m.user]
    assert memory_prompts and all(MEMORY_TEXT in m.user for m in memory_prompts)
    excerpts = [m.user.split("[RETRIEVED ANSWERS BY THIS RESPONDENT]\n")[1].split("\n\n[SURVEY QUESTIONS]")[0]
                for m, _ in run["sent"] if "[RETRIEVED ANSWERS BY THIS RESPONDENT]" in m.user]
    assert len(excerpts) == 4 and all(0 < len(e) <= len(MEMORY_TEXT) for e in excerpts)


def test_the_answers_are_scored_against_the_recorded_options(run):
    # The stand-in chose each item's last option: accuracy is the share of items recorded so.
    for pid, items in run["items"].items():
        mine = [s for s in run["scores"][MEMORY] if s.pid == pid]
        assert [s.accuracy for s in mine] == [1.0 if i.wave4 == len(i.options) else 0.0 for i in items]
        assert [s.deviation for s in mine] == [
            (len(i.options) - i.wave4) / (len(i.options) - 1) if i.ordinal else None for i in items]
    summary = summarize(MEMORY, run["scores"][MEMORY])
    assert summary.n_people == 4 and summary.n_unscored == 0


def test_contrasts_between_conditions_and_the_human_row(run):
    scores = dict(run["scores"], human=run["human"])
    contrasts = survey_contrasts(scores, [(OWNWORDS, MEMORY), ("human", MEMORY)], draws=2000)
    by_key = {(c.first, c.second, c.metric): c.result for c in contrasts}
    # OwnWords's stand-in differs only on two-option items: its deviation equals the memory's.
    assert by_key[(OWNWORDS, MEMORY, "deviation")].estimate == 0.0
    assert by_key[(OWNWORDS, MEMORY, "accuracy")].n_people == 4
    assert by_key[("human", MEMORY, "accuracy")].estimate > 0


def test_every_condition_has_its_prompt_file():
    assert len(SURVEY_CONDITIONS) == 6
