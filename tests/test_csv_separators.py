"""CSV formulas via `;`: every CSV of the app opens safely with `,` *and* with `;`.

A rating note `ok;=2+5;` or a contrast named `x;=2+5;y` used to open in LibreOffice, told to
split on `;`, as a live formula. Now every field is quoted and a formula start behind a `;`, tab or
line break inside a cell gets a `'`. Each export is read back three ways: as the CSV it is (`,`),
split on `;` by Python's reader (it leaves quotes when a quoted field goes on past its closing
quote, as Excel does), and split on `;` the way LibreOffice does (a quote ends a field only before
the separator or the line's end). No field may start with a formula character unless it is a
number. Numbers are the same strings as before, only quoted.
"""
import csv
import io
import re
from pathlib import Path

import pytest
from django.urls import reverse

from annotations.models import HumanGrade
from experiments.analysis.dashboard import dashboard_refresh
from experiments.analysis.exports import csv_text, scores_package_rows
from experiments.models import Protocol
from experiments.web.analysis.views import CSV_TABLES as RUN_TABLES
from tests.annotations_helpers import MEMORY, OWNWORDS, QUESTION_ONLY
from tests.test_annotations_results import rate_everything

REPO = Path(__file__).resolve().parent.parent
FORMULA_STARTS = ("=", "+", "-", "@", "|", "%", "\t", "\r")
HOSTILE_NOTES = ["ok;=2+5;", "x;=2+5;y", "a;\t+1", "two lines\n=1+1", 'q;"=1+1"', "fine; -0.25", "a\r\n@SUM(A1)"]
HOSTILE_NAMES = ["x;=2+5;y", "ok;=2+5;", "plain name"]


def is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def libreoffice_fields(line: str, separator: str) -> list[str]:
    """One line split as LibreOffice's CSV import does: a field opened by a quote runs to a quote
    followed by the separator or the end of the line (`""` is a quote); other fields run to the separator."""
    fields, i = [], 0
    while i <= len(line):
        if line.startswith('"', i):
            j, text = i + 1, []
            while j < len(line):
                if line[j] == '"' and line.startswith('"', j + 1):
                    text.append('"')
                    j += 2
                elif line[j] == '"' and (j + 1 == len(line) or line[j + 1] == separator):
                    j += 1
                    break
                else:
                    text.append(line[j])
                    j += 1
            fields.append("".join(text))
            i = j + 1
        else:
            j = line.find(separator, i)
            j = len(line) if j < 0 else j
            fields.append(line[i:j])
            i = j + 1
    return fields


def fields_read(text: str, separator: str) -> list[str]:
    """Every field a spreadsheet could make of `text` split on `separator`, by both readers."""
    python = [f for row in csv.reader(io.StringIO(text, newline=""), delimiter=separator) for f in row]
    # LibreOffice keeps a quoted field's line breaks; read the file as its records.
    records = [r for r in re.split(r'\r\n(?="|$)', text) if r]
    return python + [f for record in records for f in libreoffice_fields(record, separator)]


def assert_opens_safely(text: str) -> list[list[str]]:
    for separator in (",", ";"):
        for field in fields_read(text, separator):
            assert not field.startswith(FORMULA_STARTS) or is_number(field), (separator, field)
    rows = list(csv.reader(io.StringIO(text, newline="")))
    # Every field quoted: writing the rows back with QUOTE_ALL gives the very same text.
    again = io.StringIO()
    csv.writer(again, quoting=csv.QUOTE_ALL, lineterminator="\r\n").writerows(rows)
    assert again.getvalue() == text
    return rows


def test_the_rule_opens_safely_with_both_separators_and_keeps_numbers():
    values = [-0.25, 3, 0.1 + 0.2, "-0.5", 1e-7]
    text = csv_text(["note", "number"], [{"note": n, "number": values[i % len(values)]}
                                         for i, n in enumerate(HOSTILE_NOTES)])
    rows = assert_opens_safely(text)
    assert [r[0] for r in rows[1:]][:2] == ["ok;'=2+5;", "x;'=2+5;y"]
    # The numbers: the strings Python writes, quoted and nothing else.
    assert [r[1] for r in rows[1:]] == [str(values[i % len(values)]) for i in range(len(HOSTILE_NOTES))]
    assert '"-0.25"' in text and '"0.30000000000000004"' in text


def test_the_same_text_unquoted_would_run_a_formula():
    # The check itself can fail: the old writing (quotes only where needed) opens `=2+5` with `;`.
    old = "note,grade\r\nok;=2+5;,3\r\n"
    with pytest.raises(AssertionError):
        assert_opens_safely(old)


def test_every_csv_of_the_app_is_written_by_the_one_helper():
    """No module writes CSV but `experiments.analysis.exports.csv_text` (and so QUOTE_ALL)."""
    writers, downloads = [], []
    for path in list((REPO / "experiments").rglob("*.py")) + list((REPO / "annotations").rglob("*.py")):
        source = path.read_text()
        if re.search(r"csv\.(writer|DictWriter)\(", source) and path != REPO / "experiments" / "analysis" / "exports.py":
            writers.append(str(path.relative_to(REPO)))
        if "text/csv" in source and "csv_text" not in source and "export_csv" not in source:
            downloads.append(str(path.relative_to(REPO)))
    assert writers == [] and downloads == []


@pytest.fixture
def hostile_campaign(campaign):
    """The campaign's run with `;` contrast names, every item rated with a `;` note."""
    terms = [{OWNWORDS: 1, MEMORY: -1}, {MEMORY: 1, QUESTION_ONLY: -1}, {QUESTION_ONLY: 1, OWNWORDS: -1}]
    Protocol.objects.filter(pk=campaign.run.protocol_id).update(contrasts=[
        {"name": name, "terms": terms[i], "family": True} for i, name in enumerate(HOSTILE_NAMES)])
    campaign.run.protocol.refresh_from_db()
    result = dashboard_refresh(campaign.run)
    result.payload["contrasts"][0].update(estimate=-0.25, lo=-0.5)
    result.save(update_fields=["payload"])
    rate_everything(campaign, note="x")
    for i, grade in enumerate(HumanGrade.objects.filter(assignment__campaign=campaign).order_by("pk")):
        grade.note = HOSTILE_NOTES[i % len(HOSTILE_NOTES)]
        grade.save(update_fields=["note"])
    return campaign


def test_every_export_opens_safely_with_both_separators(client, cast, hostile_campaign):
    campaign, run = hostile_campaign, hostile_campaign.run
    client.force_login(cast["owner"])
    urls = [reverse("run_dashboard_csv", args=["alpha", run.pk, table]) for table in RUN_TABLES]
    urls += [reverse("run_scores_csv", args=["alpha", run.pk]),
             reverse("run_tables", args=["alpha", run.pk]) + "?format=csv",
             reverse("project_tables", args=["alpha"]) + f"?run={run.pk}&format=csv",
             reverse("campaign_export", args=["alpha", campaign.pk, "csv"])]
    from annotations import campaign_agreement
    from annotations.core.result_tables import CSV_TABLES as CAMPAIGN_TABLES
    campaign_agreement.results_for_page(campaign, enqueue=lambda *a: False)
    urls += [reverse("campaign_results_csv", args=["alpha", campaign.pk, table]) for table in CAMPAIGN_TABLES]
    texts = {}
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        assert response["Content-Type"].startswith("text/csv"), url
        texts[url] = response.content.decode()
        assert_opens_safely(texts[url])
    joined = "".join(texts.values())
    assert "ok;'=2+5;" in joined and "x;'=2+5;y" in joined  # the hostile texts were there to be read
    contrasts = list(csv.DictReader(io.StringIO(texts[urls[list(RUN_TABLES).index("contrasts")]], newline="")))
    named = {row["name"]: row for row in contrasts}
    assert (named["x;'=2+5;y"]["estimate"], named["x;'=2+5;y"]["lo"]) == ("-0.25", "-0.5")


def test_the_numeric_package_is_the_same_numbers_only_quoted(client, cast, rated_run):
    client.force_login(cast["owner"])
    text = client.get(reverse("run_scores_csv", args=["alpha", rated_run.pk])).content.decode()
    header, rows = scores_package_rows(rated_run)
    before = io.StringIO()  # the file as it was written before: the same rows, quotes only where needed
    writer = csv.DictWriter(before, fieldnames=header, lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    assert list(csv.reader(io.StringIO(text, newline=""))) == list(csv.reader(io.StringIO(before.getvalue(), newline="")))
    assert text.replace('"', "") == before.getvalue().replace('"', "")  # bit for bit, apart from the quotes
    assert text.count('"') == 2 * sum(len(header) for _ in range(len(rows) + 1))  # and every field has them
