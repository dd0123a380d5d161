"""Every rating of a campaign as CSV or JSONL, for owners: remapped ids, no usernames, no participant text.

One row per rating (HumanGrade), flag-only ratings included, ordered by item number and
rater label. Identifiers are opaque labels:

* ``rater``: R1, R2 … by user id (the same labels as the results pages);
* ``guidelines_version``: the campaign's guidelines the rater's page showed (empty: none published);
* ``showing``: 1, or 2 for a hidden repeat of the same rater's showing 1 (the retest);
* ``task`` and ``person``: T<n> and P<n> with the numbers of the run's numeric package
  (`experiments.analysis.exports`: task = position in the cohort, person = the order the
  bootstrap resamples people in), so the export joins that package without revealing either id.

Notes and flag reasons are raters' free text and may be hostile: in the CSV, `defusedcsv`
prefixes a quote to any cell starting with = + - @ | % (and the app's one rule,
`experiments.analysis.exports.csv_safe_cell`, does the same for a cell starting with a tab
or CR, or with such a character behind leading whitespace or control characters);
the JSONL keeps the text exactly, as JSON strings are not evaluated.
"""
from __future__ import annotations

import json

from annotations.campaign_agreement import rater_labels
from annotations.core.pairwise import outcome
from annotations.models import HumanGrade, RatingCampaign, RatingItem
from annotations.pairwise import is_pairwise
# One CSV rule for the whole app: defusedcsv's writer plus the OWASP additions.
from experiments.analysis.exports import cluster_labels, csv_text
from experiments.models import CohortTask

HEADER = ["item", "task", "person", "conditions", "judge_score", "rater", "grade", "flagged", "flag_reason", "note",
          "seconds", "created_at", "updated_at", "gold_grade", "adjudicated_grade", "showing",
          "guidelines_version"]
CONDITION_SEPARATOR = "; "
# A pairwise campaign's rows also say what the rater chose as shown (a, b, tie), which condition was
# on side A, what the choice means (x: the first condition wins, y: the second, tie) and Y's judge grade;
# `conditions` is then [X, Y] and `judge_score` X's grade. A grade campaign's export is unchanged.
PAIRWISE_HEADER = HEADER + ["preference", "x_on_a", "winner", "judge_score_b"]
# A content-check campaign's rows also give the answer "same content?" (yes, partly, no); `conditions`
# is then [the control condition] and `judge_score` the original answer's grade (none for evidence).
CONTENT_CHECK_HEADER = HEADER + ["same_content"]


def task_and_person_labels(campaign: RatingCampaign) -> tuple[dict[int, str], dict[int, str]]:
    """task id → T<n>, person id → P<n>, numbered as in the run's numeric package."""
    rows = list(CohortTask.objects.filter(cohort_id=campaign.run.protocol.cohort_id).order_by("position")
                .values_list("task_id", "task__session__person_id"))
    people = cluster_labels(person for _, person in rows)
    return ({task: f"T{n}" for n, (task, _) in enumerate(rows, start=1)},
            {person: f"P{n}" for person, n in people.items()})


def export_rows(campaign: RatingCampaign) -> list[dict]:
    """One dict per rating, in HEADER's fields; ``conditions`` is a list."""
    raters = rater_labels(campaign)
    tasks, people = task_and_person_labels(campaign)
    items = {
        i["pk"]: i for i in RatingItem.objects.filter(campaign=campaign).values(
            "pk", "number", "task_id", "task__session__person_id", "conditions", "judge_score", "gold_grade",
            "adjudication__grade", "judge_score_b")
    }
    rows, pairwise = [], is_pairwise(campaign)
    for g in (HumanGrade.objects.filter(assignment__campaign=campaign)
              .values("assignment__item_id", "assignment__rater_id", "grade", "flagged", "flag_reason", "note",
                      "seconds_spent", "created_at", "updated_at", "assignment__showing", "guidelines_version",
                      "preference", "assignment__x_on_a", "same_content")):
        item = items[g["assignment__item_id"]]
        rows.append({
            "item": item["number"],
            "task": tasks.get(item["task_id"], ""),
            "person": people.get(item["task__session__person_id"], ""),
            "conditions": list(item["conditions"]),
            "judge_score": item["judge_score"],
            "rater": raters[g["assignment__rater_id"]],
            "grade": g["grade"],
            "flagged": g["flagged"],
            "flag_reason": g["flag_reason"],
            "note": g["note"],
            "seconds": g["seconds_spent"],
            "created_at": g["created_at"].isoformat(),
            "updated_at": g["updated_at"].isoformat(),
            "gold_grade": item["gold_grade"],
            "adjudicated_grade": item["adjudication__grade"],
            "showing": g["assignment__showing"],
            "guidelines_version": g["guidelines_version"],
        })
        if campaign.kind == "content-check":
            rows[-1]["same_content"] = g["same_content"]
        if pairwise:
            rows[-1].update(preference=g["preference"], x_on_a=g["assignment__x_on_a"],
                            winner=outcome(g["preference"], g["assignment__x_on_a"]) if g["preference"] else "",
                            judge_score_b=item["judge_score_b"])
    rows.sort(key=lambda r: (r["item"], int(r["rater"][1:]), r["showing"]))
    return rows


def export_csv(campaign: RatingCampaign) -> str:
    header = {"pairwise": PAIRWISE_HEADER, "content-check": CONTENT_CHECK_HEADER}.get(campaign.kind, HEADER)
    return csv_text(header, (
        {**row, "conditions": CONDITION_SEPARATOR.join(row["conditions"]), "flagged": int(row["flagged"]),
         **({"x_on_a": "" if row["x_on_a"] is None else int(row["x_on_a"])} if "x_on_a" in row else {})}
        for row in export_rows(campaign)))


def export_jsonl(campaign: RatingCampaign) -> str:
    return "".join(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n" for row in export_rows(campaign))
