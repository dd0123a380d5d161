"""The README's main command, inline (no queue): data, cohort, logins and a finished run."""
import re
from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from experiments.models import Cohort, Run, Session, Task, Turn

pytestmark = pytest.mark.slow


def test_demo_setup_loads_the_sample_and_lands_on_a_finished_offline_run(db):
    out = StringIO()
    call_command("demo_setup", stdout=out)
    text = out.getvalue()
    assert Session.objects.count() == 251 and Turn.objects.count() == 5088 + 227
    assert Task.objects.count() == 814  # the demo's looser rule: 8 pairs, 3 targets
    assert Cohort.objects.get(name="demo").cohort_tasks.count() > 0
    run = Run.objects.get(protocol__project__slug="demo", protocol__name="demo-offline")
    assert run.status == Run.Status.FINISHED and run.inline
    assert "offline stand-in, not a model" in text
    # beside it, the small paraphrase-controls run the content-check campaign rates
    controls = Run.objects.get(protocol__project__slug="demo", protocol__name="demo-controls-offline")
    assert controls.status == Run.Status.FINISHED and controls.inline
    # on the demo cohort's first five people (the same seeded draw, stopped at five), all their tasks
    demo_tasks = list(run.protocol.cohort.cohort_tasks.order_by("position").values_list("task_id", "task__session_id"))
    sessions = list(dict.fromkeys(session for _, session in demo_tasks))[:5]
    assert (list(controls.protocol.cohort.cohort_tasks.order_by("position").values_list("task_id", flat=True))
            == [task for task, session in demo_tasks if session in sessions])
    logins = dict(re.findall(r"^login: (\S+) / (\S+)", text, re.MULTILINE))
    assert set(logins) == {"demo", "demo-viewer"}
    assert re.search(r"admin login: demo-admin / \S+", text)
    assert authenticate(username="demo", password=logins["demo"]) is not None
    # Running it again imports nothing twice and starts no second run.
    call_command("demo_setup", stdout=(text_again := StringIO()))
    assert Session.objects.count() == 251 and Run.objects.filter(protocol__project__slug="demo").count() == 2
    assert "demo protocol 'demo-controls-offline' exists already; no new run" in text_again.getvalue()
    assert Run.objects.filter(protocol__project__slug="demo-survey").count() == 1


def test_demo_setup_runs_an_offline_survey_on_the_synthetic_sample_labelled_as_such(db, client):
    from experiments.models import Membership, SurveyAnswer, SurveyStudy
    out = StringIO()
    call_command("demo_setup", stdout=out)
    assert re.search(r"survey run \d+ .* SYNTHETIC sample ran inline: finished \(offline stand-in, not a model\)",
                     out.getvalue())
    study = SurveyStudy.objects.get(project__slug="demo-survey")
    assert study.synthetic and study.respondents.count() == 12
    run = Run.objects.get(protocol__project__slug="demo-survey")
    assert run.status == Run.Status.FINISHED and run.analysis["kind"] == "survey" and run.analysis["synthetic"]
    # the offline stand-in answers every item of every call (its JSON parses)
    assert all(a.status == "ok" and not a.error and all(e[0] for e in a.items)
               for a in SurveyAnswer.objects.filter(run=run))
    owner = Membership.objects.get(project__slug="demo-survey", user__username="demo").user
    client.force_login(owner)
    page = client.get(f"/p/demo-survey/runs/{run.pk}/survey/").content.decode()
    assert 'id="synthetic-label"' in page and 'id="offline-label"' in page


def test_demo_ratings_adds_raters_and_a_campaign_over_the_finished_demo_run(db):
    from annotations.models import RatingCampaign
    from annotations.rating import rater_item
    call_command("demo_setup", stdout=StringIO())
    out = StringIO()
    call_command("demo_ratings", stdout=out)
    logins = dict(re.findall(r"login: (\S+) / (\S+)", out.getvalue()))
    assert set(logins) == {"demo-rater-1", "demo-rater-2"}
    user = authenticate(username="demo-rater-1", password=logins["demo-rater-1"])
    campaign = RatingCampaign.objects.get(name="demo-ratings")
    # 60 items, 2 raters each, and 10 % hidden repeats: 6 more showings per rater's 60 items
    from annotations.models import REPEAT_SHOWING
    assert campaign.items.count() == 60 and campaign.repeat_percent == 10
    assert campaign.assignments.count() == 2 * (60 + 6)
    assert campaign.assignments.filter(showing=REPEAT_SHOWING).count() == 2 * 6
    assert rater_item(campaign, user)["item"] is not None   # the raters still have items to rate
    # generated demo ratings, through the rating service, labelled as such: results show numbers
    from annotations.campaign_agreement import campaign_results
    from annotations.management.commands.demo_ratings import (
        DEMO_PREFERENCE_NOTE,
        DEMO_RATING_NOTE,
    )
    from annotations.models import HumanGrade
    grades = HumanGrade.objects.filter(campaign=campaign)
    # each rater rates int(0.8 × 66) = 52 showings of their queue, in queue order
    assert grades.count() == 2 * 52 and set(grades.values_list("note", flat=True)) == {DEMO_RATING_NOTE}
    assert set(grades.values_list("guidelines_version", flat=True)) == {1}  # the published demo guidelines
    repeats_rated = grades.filter(assignment__showing=REPEAT_SHOWING).count()
    firsts_rated = grades.count() - repeats_rated
    assert "104 demo ratings generated" in out.getvalue() and "10% hidden repeats (12 repeat showings)" in out.getvalue()
    results = campaign_results(campaign)
    assert results["between"]["pairs"]["n_pairs"] > 0 and results["vs_judge"]["pooled"]["n_pairs"] == firsts_rated
    assert 0 < results["between"]["pairs"]["exact"]["estimate"] < 1    # demo raters differ sometimes
    # the retest row: repeats rated at both showings (a repeat comes after its first showing)
    assert 0 < repeats_rated and results["retest"]["pairs"]["n_pairs"] == repeats_rated
    assert results["retest"]["pairs"]["exact"]["estimate"] is not None
    # the pairwise demo campaign: generated preferences, labelled, win rates and Bradley–Terry with numbers
    from annotations.pairwise import pairwise_results
    pairwise = RatingCampaign.objects.get(name="demo-pairwise")
    assert pairwise.kind == "pairwise" and pairwise.items.count() == 40 and pairwise.assignments.count() == 80
    prefs = HumanGrade.objects.filter(campaign=pairwise)
    assert prefs.count() == 2 * 32 and set(prefs.values_list("note", flat=True)) == {DEMO_PREFERENCE_NOTE}
    assert set(prefs.values_list("preference", flat=True)) <= {"a", "b", "tie"}
    assert "64 demo preferences generated" in out.getvalue()
    numbers = pairwise_results(pairwise)
    assert numbers["ratings"] == 64 and sum(r["ratings"] for r in numbers["win_rates"]) == 64
    assert all(r["x_wins"]["estimate"] is not None for r in numbers["win_rates"])
    bt = numbers["bradley_terry"]
    assert bt["estimable"] and all(c["theta"] is not None and c["lo"] is not None for c in bt["conditions"])
    # the content-check campaign over the controls run (test_the_demo_content_check_campaign...)
    assert RatingCampaign.objects.filter(kind="content-check", name="demo-content-check").exists()
    contents = HumanGrade.objects.filter(campaign__name="demo-content-check").count()
    call_command("demo_ratings", stdout=StringIO())  # again: new passwords, no second campaign
    assert RatingCampaign.objects.count() == 3 and HumanGrade.objects.count() == 104 + 64 + contents


def test_the_demo_content_check_campaign_shows_shares_agreement_and_contrasts(db, client):
    from annotations.content_check import content_check_results
    from annotations.management.commands.demo_ratings import DEMO_CONTENT_NOTE
    from annotations.models import HumanGrade, RatingCampaign
    call_command("demo_setup", stdout=StringIO())
    out = StringIO()
    call_command("demo_ratings", stdout=out)
    campaign = RatingCampaign.objects.get(name="demo-content-check")
    run = Run.objects.get(protocol__name="demo-controls-offline")
    assert campaign.kind == "content-check" and campaign.run == run
    controls = ["memory(concrete,100w)+one-shot+answer-paraphrased", "ownwords(B=|memory|)+paraphrased",
                "ownwords(B=|memory|)+answer-paraphrased"]
    assert sorted(campaign.conditions) == sorted(controls)
    # a stratified sample: 12 pairs of each control, 2 raters each, each rater answers int(0.8 × 36) = 28
    assert campaign.items.count() == 36 and campaign.assignments.count() == 72
    assert sorted(c for i in campaign.items.all() for c in i.conditions) == sorted(controls * 12)
    answers = HumanGrade.objects.filter(campaign=campaign)
    assert answers.count() == 2 * 28 and set(answers.values_list("note", flat=True)) == {DEMO_CONTENT_NOTE}
    assert set(answers.values_list("same_content", flat=True)) <= {"yes", "partly", "no"}
    assert f"content-check campaign 'demo-content-check' over run {run.pk}" in out.getvalue()
    assert "36 original–paraphrase pairs of 3 controls" in out.getvalue()
    assert "56 demo 'same content?' answers generated" in out.getvalue()
    results = content_check_results(campaign)
    # shares per control, each with an interval
    assert sorted(row["condition"] for row in results["shares"]) == sorted(controls)
    for row in results["shares"]:
        assert row["ratings"] > 0
        for answer in ("yes", "partly", "no"):
            share = row[answer]
            assert share["estimate"] is not None and share["lo"] <= share["estimate"] <= share["hi"]
    # agreement between the two demo raters on the items both answered
    assert results["agreement"]["pairs"]["n_pairs"] > 0
    assert results["agreement"]["pairs"]["exact"]["estimate"] is not None
    # the contrasts: planned ones with a control, one under the paraphrase grades, original − control;
    # each on every version's tasks with an estimate
    names = [c["name"] for c in results["contrasts"]]
    assert "OwnWords: verbatim − paraphrased" in names and "OwnWords − memory (paraphrase grades)" in names
    assert "memory(concrete,100w)+one-shot − memory(concrete,100w)+one-shot+answer-paraphrased" in names
    for contrast in results["contrasts"]:
        assert [v["subset"] for v in contrast["versions"]][:2] == ["all graded tasks", "rated tasks"]
        assert contrast["versions"][0]["estimate"] is not None
    # its results page, as the demo's viewer opens it
    from experiments.models import Membership
    client.force_login(Membership.objects.get(project__slug="demo", user__username="demo-viewer").user)
    page = client.get(f"/p/demo/ratings/{campaign.pk}/content-check/").content.decode()
    assert 'id="shares-table"' in page and 'id="contrasts-table"' in page
    assert re.search(r'id="content-agreement">\d+ pairs of ratings', page)
    # once: a second call finds the campaign
    call_command("demo_content_check", stdout=(again := StringIO()))
    assert "exists already" in again.getvalue() and RatingCampaign.objects.filter(kind="content-check").count() == 1


def test_the_demos_memberships_are_in_the_audit_log(db):
    from experiments.models import AuditEntry
    call_command("demo_setup", stdout=StringIO())
    call_command("demo_ratings", stdout=StringIO())
    targets = set(AuditEntry.objects.filter(project__slug="demo", kind="member").values_list("target", flat=True))
    assert "created the project, with demo as its owner" in targets
    assert {"added demo-viewer as viewer", "added demo-rater-1 as rater", "added demo-rater-2 as rater"} <= targets
