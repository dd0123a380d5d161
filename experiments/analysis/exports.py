"""The numeric package of a run (paper, "Ethical considerations"): task-level scores with
remapped person and session labels, conditions, word and character counts — no text;
and the one rule every CSV of the app is written by (`csv_text`, `csv_safe_cell`).

The package is *long*: one row per task and condition (HEADER). It is the one format of
`manage.py contrast`, which pairs two conditions' grades by ``task`` and resamples ``person``:
people (and studies) are numbered in the order the bootstrap takes them, so the command gives
the dashboard's figures from the package alone.

The CSV rule (formula injection): cells go through `defusedcsv`'s writer, which
puts a `'` before a text cell starting with = + - @ | or % (and escapes its `|`), and we add
the rest of the OWASP rule: a text cell starting with a tab or a carriage return, or hiding a
formula start behind leading whitespace or control characters (some spreadsheets strip those),
gets the `'` too. Numbers are never touched, deliberately: an int or float cell is written as
Python writes it (-0.25 stays -0.25) and so does a text cell that is a plain number
(defusedcsv leaves `-?[0-9,.]+` alone), because a spreadsheet reads those as numbers, not
formulas; quoting them would turn every negative estimate into text.

Separators: a file opened with `;` (or tab) as its separator splits a cell at every `;`
inside it, and the piece after it (`ok;=2+5;`) is a cell of its own to the spreadsheet. So every
field is quoted (QUOTE_ALL: LibreOffice then keeps the whole quoted field together), and a formula
start right after a `;`, tab or line break inside a text cell gets the `'` too, for readers that
do split there (and are then outside the quotes at the next line break).
A quoted number is still read as a number, and its digits are the ones Python writes, as before.
"""
from __future__ import annotations

import io
import re

from defusedcsv import csv

from experiments.analysis.grades import final_grades
from experiments.models import Prediction, Run
from experiments.core.conditions import FINAL
from experiments.data.sessions import cohort_tasks

# What a spreadsheet may read as the start of a formula (defusedcsv's own set) ...
FORMULA_STARTS = ("=", "+", "-", "@", "|", "%")
# ... and what OWASP adds: a leading tab or carriage return.
CONTROL_STARTS = ("\t", "\r")
_LEADING_BLANKS = " \t\r\n\x0b\x0c\x00"
# A formula start behind a separator a spreadsheet may be told to split on (`;`, tab) or a line
# break (a reader that split the cell at a `;` is outside any quotes there), perhaps behind blanks
# or quotes as well: a `'` goes right after the separator or break.
_FORMULA_AFTER_BREAK = re.compile(r'([;\t\r\n])(?=[ \t\r\n\x0b\x0c\x00"]*[=+\-@|%])')

HEADER = ["task", "person", "session", "study", "target", "condition", "status", "grade", "score",
          "answer_words", "answer_chars", "evidence_chars", "budget"]


def sequential_labels(keys) -> dict:
    """Opaque labels → 1, 2, 3 … in order of first appearance (order-preserving)."""
    labels: dict = {}
    for key in keys:
        labels.setdefault(key, len(labels) + 1)
    return labels


def cluster_labels(keys) -> dict:
    """Person or study ids → 1, 2, 3 … in ascending id order: the order the bootstrap resamples them in.

    `paired_bootstrap` takes clusters in ``np.unique`` order of their ids, so numbering them in
    that order lets anyone recompute the app's intervals from the package, to the last digit
    (`manage.py contrast` on the package), without the ids themselves.
    """
    return {key: n for n, key in enumerate(sorted(set(keys)), start=1)}


def scores_package_rows(run: Run) -> tuple[list[str], list[dict]]:
    tasks = cohort_tasks(run.protocol.cohort)
    person = cluster_labels(t.session.person_id for t in tasks)
    session = sequential_labels(t.session_id for t in tasks)
    study = cluster_labels(t.session.study_id for t in tasks)
    task_number = {t.pk: i + 1 for i, t in enumerate(tasks)}
    table = final_grades(run)
    predictions = {
        (p["task_id"], p["condition"]): p
        for p in Prediction.objects.filter(run=run, label=FINAL).values(
            "task_id", "condition", "status", "text", "evidence_chars", "budget")
    }
    rows = []
    for task in tasks:
        for condition in run.protocol.conditions:
            prediction = predictions.get((task.pk, condition), {})
            text = prediction.get("text")
            grade = table.get(condition, {}).get(task.pk)
            rows.append({
                "task": task_number[task.pk],
                "person": person[task.session.person_id],
                "session": session[task.session_id],
                "study": study[task.session.study_id],
                "target": task.position + 1,
                "condition": condition,
                "status": prediction.get("status", "missing"),
                "grade": "" if grade is None else grade,
                "score": "" if grade is None else round(grade / 3, 6),
                "answer_words": "" if text is None else len(text.split()),
                "answer_chars": "" if text is None else len(text),
                "evidence_chars": prediction.get("evidence_chars", ""),
                "budget": prediction.get("budget") if prediction.get("budget") is not None else "",
            })
    return HEADER, rows


def csv_safe_cell(value):
    """A cell no spreadsheet will run: numbers as they are; text the writer alone would miss gets a `'`.

    (A text cell starting with a formula character is quoted by defusedcsv's writer.)
    """
    if not isinstance(value, str):
        return value
    body = value.lstrip(_LEADING_BLANKS)  # (the blanks before a first formula start: the rule below)
    value = value[:len(value) - len(body)] + _FORMULA_AFTER_BREAK.sub(r"\1'", body)
    if value.startswith(CONTROL_STARTS):
        return "'" + value
    stripped = value.lstrip(_LEADING_BLANKS)
    if stripped != value and stripped.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_text(header, rows) -> str:
    """Rows (dicts; keys outside `header` ignored) as CSV text under the app's one CSV rule."""
    buffer = io.StringIO()
    # Lines end in CRLF (RFC 4180), and that is what makes the writer quote a cell holding a
    # lone CR: with "\n" alone it would write the CR bare and a reader would split the row there.
    # Every field quoted: no `;` inside a cell can end it for a spreadsheet.
    writer = csv.DictWriter(buffer, fieldnames=header, extrasaction="ignore", lineterminator="\r\n",
                            quoting=csv.QUOTE_ALL)
    writer.writeheader()
    for row in rows:
        writer.writerow({key: csv_safe_cell(value) for key, value in row.items()})
    return buffer.getvalue()
