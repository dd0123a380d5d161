"""The survey token estimate on the protocol page: prompt lengths measured over
respondents spread evenly across the sample, not the first respondent alone."""
import pytest
from django.core.management import call_command

from experiments.core.survey.prompt import MEMORY, SCREENER_ONLY, assemble_survey, assemble_survey_memory
from experiments.core.survey.screener import screener_text
from experiments.core.survey.targets import target_items
from experiments.execution.survey_planning import MEMORY_CHARS, estimate_spread, survey_estimate
from experiments.models import Cohort, Project
from experiments.data.surveys import respondent_record, sample_respondents
from tests.engine_helpers import make_protocol
from tests.survey_helpers import SAMPLE

SERVER = {"provider": "openai", "base_url": "https://llm.example/v1", "model": "gpt-test-1", "timeout_s": 5}


def test_the_spread_runs_from_the_first_to_the_last_evenly():
    rows = list(range(400))
    spread = estimate_spread(rows, 25)
    assert len(spread) == 25 and len(set(spread)) == 25
    assert spread[0] == 0 and spread[-1] == 399 and spread[12] == 200
    assert {b - a for a, b in zip(spread, spread[1:])} <= {16, 17}
    assert estimate_spread(rows[:7], 25) == rows[:7]
    assert estimate_spread(rows, 1) == [0]


@pytest.mark.django_db
def test_the_estimate_measures_every_respondent_of_a_small_sample():
    project = Project.objects.create(slug="est", name="Estimate")
    call_command("import_survey", str(SAMPLE), "--project", "est", "--name", "twin", "--workers", "0")
    cohort = Cohort.objects.get(name="twin reported")
    protocol = make_protocol(project, cohort, conditions=[SCREENER_ONLY, MEMORY], generator=SERVER)
    estimate = survey_estimate(protocol, 800)
    respondents = [respondent_record(row) for row in sample_respondents(cohort)]
    n = len(respondents)
    prompts = [assemble_survey(SCREENER_ONLY, target_items(r), screener=screener_text(r)) for r in respondents]
    lengths = [len(p.system) + len(p.user) for p in prompts]
    assert len(set(lengths)) > 1  # the respondents' prompts differ: the first alone would be off
    mean = sum(lengths) / n
    answers = next(p for p in estimate["phases"] if p["phase"] == "answers")
    assert answers["calls"] == 2 * n
    # screener only: the mean prompt; memory: the mean prompt and a 100-word memory
    assert answers["input_tokens"] == round(n * (2 * mean + MEMORY_CHARS) / 4)
    assert answers["input_tokens"] != round(n * (2 * lengths[0] + MEMORY_CHARS) / 4)
    assert f"averaged over {n} respondents" in " ".join(answers["notes"])
    assert estimate["calls"] == n + 2 * n  # a memory per respondent, then the answers
    # the memory call: each persona (lengths counted by the database) and the prompt around it
    persona = sum(len(r.persona_text) for r in respondents) / n
    overhead = sum(len(c.system) + len(c.user) - len(r.persona_text)
                   for r, c in ((r, assemble_survey_memory(r.persona_text)) for r in respondents)) / n
    memories = next(p for p in estimate["phases"] if p["phase"] == "memories")
    assert memories["input_tokens"] == round(n * (persona + overhead) / 4)
