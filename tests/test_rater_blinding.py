"""Blinding: no page a rater can open names the judge, or a model grading.

Raters who learn that a model judge graded the answers may defer to it. Every page of the site a
rater of a campaign gets (200) is opened as that rater — the rating page, its JSON item, the
project and campaign lists, any other — and its text searched for "judge" and "model"; so are
the scripts those pages load. The rubric is presented as the study's rubric.
"""
import re
from pathlib import Path

from django.contrib.auth import get_user_model

from tests.test_input_matrix import ROUTES

REPO = Path(__file__).resolve().parent.parent
NAMING = re.compile(r"judge|model|\bLLM\b|\bGPT|\bAI\b", re.IGNORECASE)


def rater_pages(client, campaign):
    """path → body of every page the rater opens with 200 (each route filled with the campaign's ids)."""
    run = campaign.run
    values = {"slug": campaign.project.slug, "pk": campaign.pk, "run_pk": run.pk, "fmt": "csv", "table": "agreement",
              "member_pk": 1, "task_pk": 1, "session_id": "x", "job_id": "x", "respondent": 1}
    pages = {}
    for route, _ in ROUTES:
        for pk in {campaign.pk, run.pk, run.protocol_id, run.protocol.cohort_id}:
            path = "/" + re.sub(r"<(?:\w+:)?(\w+)>",
                                lambda m: str(pk if m.group(1) == "pk" else values.get(m.group(1), 1)), route)
            response = client.get(path)
            if response.status_code == 200:
                pages[path] = response.content.decode()
    return pages


def visible_text(html: str) -> str:
    """The page as a rater reads it, or its source (attributes included), minus the CSRF token."""
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", html)


def test_no_rater_page_names_the_judge_or_a_model(client, campaign):
    rater = get_user_model().objects.get(username="rater-a")
    client.force_login(rater)
    pages = rater_pages(client, campaign)
    rate_url = f"/p/{campaign.project.slug}/ratings/{campaign.pk}/rate/"
    assert rate_url in pages and rate_url + "item.json" in pages  # the rater sees an item to rate
    assert "Rubric" in pages[rate_url] and "Step 1" in pages[rate_url]  # the rubric is still there
    named = {path: sorted(set(m.group(0) for m in NAMING.finditer(visible_text(body))))
             for path, body in pages.items()}
    scripts = set(re.findall(r'<script src="/static/([^"]+)"', "".join(pages.values())))
    for script in scripts:
        text = (REPO / "static" / script.split("?")[0]).read_text()
        if not script.startswith("vendor/"):
            named[script] = sorted(set(m.group(0) for m in NAMING.finditer(text)))
    assert {path: words for path, words in named.items() if words} == {}


def test_no_rater_page_of_a_pairwise_campaign_names_a_condition_or_a_side(client, rated_run, cast):
    """A pair's rater sees two answers as A and B: never the judge, a model, a condition name, the
    judge's grades or which condition is on which side."""
    from annotations.pairwise import pairwise_campaign_create
    from tests.annotations_helpers import CONDITIONS, RATERS
    campaign = pairwise_campaign_create(run=rated_run, name="pairs", conditions=CONDITIONS, raters=RATERS[:2],
                                        user=cast["owner"], seed=5)
    client.force_login(get_user_model().objects.get(username="rater-a"))
    pages = rater_pages(client, campaign)
    rate_url = f"/p/{campaign.project.slug}/ratings/{campaign.pk}/rate/"
    item = client.get(rate_url + "item.json").json()["item"]
    assert set(item) == {"assignment", "question", "reference", "answer_a", "answer_b"}
    assert 'id="rate-answer-b"' in pages[rate_url]
    secrets = [*CONDITIONS, "x_on_a", "stratum", "prediction_b", *(f"judge {o}" for o in ("X higher", "Y higher"))]
    found = {path: sorted({w for w in secrets if w.lower() in visible_text(body).lower()}
                          | {m.group(0) for m in NAMING.finditer(visible_text(body))})
             for path, body in pages.items()}
    assert {path: words for path, words in found.items() if words} == {}


def test_no_rater_page_of_a_content_check_names_a_condition_or_a_grade(client, cast, project):
    """A content check's rater sees the question, an original and its paraphrase: never the judge, a
    model, a condition name, which control the pair comes from, or the judge's grades."""
    from annotations.content_check import content_check_campaign_create
    from tests.annotations_helpers import MEMORY, OWNWORDS, RATERS, add_raters, finished_run
    controls = [f"{MEMORY}+answer-paraphrased", f"{OWNWORDS}+paraphrased"]
    run = finished_run(project, people=2, conditions=[MEMORY, OWNWORDS, *controls])
    add_raters(project)
    campaign = content_check_campaign_create(run=run, name="check", raters=RATERS[:2], user=cast["owner"], seed=5)
    client.force_login(get_user_model().objects.get(username="rater-a"))
    pages = rater_pages(client, campaign)
    rate_url = f"/p/{campaign.project.slug}/ratings/{campaign.pk}/rate/"
    item = client.get(rate_url + "item.json").json()["item"]
    assert set(item) == {"assignment", "question", "original", "rewritten", "what"}
    assert 'id="rate-rewritten"' in pages[rate_url] and 'id="content-choice"' in pages[rate_url]
    secrets = [MEMORY, OWNWORDS, "paraphrased", "answer-paraphrase", "judge_score", "stratum", "prediction_b",
               "+paraphrase"]
    found = {path: sorted({w for w in secrets if w.lower() in visible_text(body).lower()}
                          | {m.group(0) for m in NAMING.finditer(visible_text(body))})
             for path, body in pages.items()}
    assert {path: words for path, words in found.items() if words} == {}
