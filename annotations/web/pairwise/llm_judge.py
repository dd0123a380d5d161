"""People's pairwise preferences beside the LLM pairwise judge's, for a pairwise campaign's results page.

The judge's numbers are part of the campaign's stored results (`annotations.pairwise.judge_payload`:
the latest finished pairwise-judge run over the campaign's run, its verdicts on the campaign's own
pair items, cached and queued with the rest). Here they are set beside people's win rates, pair by
pair. Numbers only: the page is the aggregate readers' (raters get 403), and no condition reaches a
rater from here.
"""
from __future__ import annotations

from experiments.models import Run


def llm_judge_beside_people(data: dict) -> dict | None:
    """{run, stand_in, rows, covered} for the page from the results payload `data`, or None without
    a pairwise-judge run. A row per pair of the campaign with something to show: people's win rates,
    the judge's (win rates, position bias, consistency) and the agreement of people with the judge."""
    judge = data.get("llm_judge")  # absent from a payload of before the judge's numbers joined it
    run = judge and Run.objects.select_related("protocol").filter(pk=judge["run"]).first()
    if not run:
        return None
    people = {(r["x"], r["y"]): r for r in data["win_rates"]}
    rows = [{**row, "people": people.get((row["x"], row["y"]))} for row in judge["rows"]]
    return {"run": run, "stand_in": judge["stand_in"], "covered": judge["covered"],
            "rows": [row for row in rows if row["people"] is not None or row["judge"] is not None]}
