"""Formula injection: no CSV of the app starts a text cell with = + - @ | % tab or CR.

Hostile contrast names and rater notes go through every CSV download (the run dashboard's
tables, the numeric package, a campaign's results tables and its export of every rating);
each comes back neutralised by a leading `'`, while numbers (negative ones included) stay
numbers a spreadsheet reads as such.
"""
import csv
import io

import pytest
from django.urls import reverse

from annotations.models import HumanGrade
from annotations.core.result_tables import CSV_TABLES as CAMPAIGN_TABLES
from experiments.analysis.dashboard import dashboard_refresh
from experiments.analysis.exports import csv_safe_cell, csv_text
from experiments.execution.control import run_start
from experiments.execution.driver import run_inline
from experiments.execution.sealing import protocol_seal
from experiments.models import AnalysisResult, Protocol, Run
from experiments.web.analysis.views import CSV_TABLES as RUN_TABLES
from tests.annotations_helpers import MEMORY, OWNWORDS, QUESTION_ONLY
from tests.test_annotations_results import rate_everything

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
HOSTILE = ['=HYPERLINK("http://x")', "+1", "@SUM(A1)", "\tcmd", "\rcmd", "-2+3", "|calc", "%0A", " \t=1+1"]
DANGEROUS_STARTS = ("=", "+", "-", "@", "|", "%", "\t", "\r")


def is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def assert_neutral(text: str) -> list[list[str]]:
    """Every cell is a number or starts with something no spreadsheet runs."""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    for row in rows:
        for cell in row:
            assert is_number(cell) or not cell.lstrip(" \t\r\n\x0b\x0c").startswith(DANGEROUS_STARTS) \
                or cell.startswith("'"), repr(cell)
            assert not cell.startswith(DANGEROUS_STARTS) or is_number(cell), repr(cell)
    return rows


def hostile_contrasts():
    terms = [{OWNWORDS: 1, MEMORY: -1}, {MEMORY: 1, OWNWORDS: -1}, {QUESTION_ONLY: 1, MEMORY: -1}]
    return [{"name": name, "terms": terms[i % len(terms)], "family": True} for i, name in enumerate(HOSTILE)]


@pytest.fixture
def hostile_run(cast, project):
    """A finished offline run whose planned contrasts carry hostile names."""
    from tests.annotations_helpers import finished_run
    run = finished_run(project)
    # A fresh protocol over the same cohort, with the hostile names, sealed and run like any other.
    protocol = Protocol.objects.create(
        project=project, name="hostile", cohort=run.protocol.cohort, conditions=[MEMORY, OWNWORDS, QUESTION_ONLY],
        generator=OFFLINE, judge=OFFLINE, contrasts=hostile_contrasts(), bootstrap={"seed": 7, "draws": 200},
    )
    hostile = Run.objects.create(protocol=protocol_seal(protocol=protocol, user=None))
    run_start(run=hostile)
    hostile = run_inline(hostile.pk)
    assert hostile.status == Run.Status.FINISHED
    # The offline stand-in grades every condition alike, so its estimates are all 0.0: give the
    # stored numbers a negative estimate and a negative bound, as a real run would have.
    result = dashboard_refresh(hostile)
    result.payload["contrasts"][1].update(estimate=-0.25, lo=-0.5)
    result.save(update_fields=["payload"])
    return hostile


def test_the_rule_itself_quotes_text_and_leaves_numbers():
    for name in HOSTILE:
        assert csv_safe_cell(name).startswith("'") or name[0] in "=+-@|%"  # the writer quotes those
    text = csv_text(["name", "estimate", "as_text"], [{"name": n, "estimate": -0.25, "as_text": "-0.25"}
                                                       for n in HOSTILE])
    rows = assert_neutral(text)
    assert [r[0] for r in rows[1:]] == ["'" + n.replace("|", "\\|") for n in HOSTILE]
    assert {(r[1], r[2]) for r in rows[1:]} == {("-0.25", "-0.25")}


def test_every_run_csv_neutralises_hostile_contrast_names_and_keeps_numbers(client, cast, hostile_run):
    client.force_login(cast["analyst"])
    seen_names = set()
    for table in RUN_TABLES:
        response = client.get(reverse("run_dashboard_csv", args=["alpha", hostile_run.pk, table]))
        assert response.status_code == 200, table
        rows = assert_neutral(response.content.decode())
        header = rows[0]
        if "name" in header:
            seen_names |= {r[header.index("name")] for r in rows[1:]}
    assert seen_names >= {"'" + n.replace("|", "\\|") for n in HOSTILE}
    contrasts = list(csv.DictReader(io.StringIO(client.get(
        reverse("run_dashboard_csv", args=["alpha", hostile_run.pk, "contrasts"])).content.decode(), newline="")))
    computed = {c["name"]: c for c in AnalysisResult.objects.get(run=hostile_run).payload["contrasts"]}
    for row in contrasts:
        original = next(n for n in HOSTILE if "'" + n.replace("|", "\\|") == row["name"])
        # Numbers are written as numbers: the same value, a minus sign where there is one.
        assert float(row["estimate"]) == pytest.approx(computed[original]["estimate"])
        assert row["estimate"] == str(computed[original]["estimate"])
    negative = next(row for row in contrasts if row["name"] == "'+1")
    assert (negative["estimate"], negative["lo"]) == ("-0.25", "-0.5")
    scores = client.get(reverse("run_scores_csv", args=["alpha", hostile_run.pk]))
    assert_neutral(scores.content.decode())


def test_campaign_csvs_neutralise_tab_and_cr_notes_and_hostile_contrast_names(client, cast, campaign):
    Protocol.objects.filter(pk=campaign.run.protocol_id).update(contrasts=hostile_contrasts())
    rate_everything(campaign, note="x")
    HumanGrade.objects.filter(assignment__campaign=campaign).update(note="\tcmd")  # the rating form strips
    HumanGrade.objects.filter(assignment__campaign=campaign, assignment__item__number=1).update(note="\rcmd")
    client.force_login(cast["owner"])
    export = client.get(reverse("campaign_export", args=["alpha", campaign.pk, "csv"])).content.decode()
    rows = list(csv.DictReader(io.StringIO(export, newline="")))
    assert {r["note"] for r in rows} == {"'\tcmd", "'\rcmd"}
    assert_neutral(export)
    from annotations import campaign_agreement
    campaign_agreement.results_for_page(campaign, enqueue=lambda *a: False)
    for table in CAMPAIGN_TABLES:
        response = client.get(reverse("campaign_results_csv", args=["alpha", campaign.pk, table]))
        assert response.status_code == 200, table
        assert_neutral(response.content.decode())
