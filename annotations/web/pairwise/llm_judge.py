"""People's pairwise preferences beside the LLM pairwise judge's, for a pairwise campaign's results page.

The judge is the latest finished pairwise-judge run over the campaign's run (`Protocol.pairwise_pairs`,
`execution.pairwise_judge`); its verdicts are read from its journal (`analysis.pairwise_verdicts`) and
restricted to the campaign's pair items (the same tasks and pairs people rated). Per pair: the share
of each outcome by people and by the judge side by side, the judge's position bias and consistency, and
agreement of each person's choice with the judge's combined verdict (`core.pairwise_judge`). Numbers
only: the page is the aggregate readers' (raters get 403), and no condition reaches a rater from here.
"""
from __future__ import annotations

from annotations.campaign_agreement import bootstrap_settings
from annotations.models import RatingCampaign, RatingItem
from annotations.pairwise import pair_ratings
from experiments.analysis.pairwise_verdicts import judged_pairs, stand_in
from experiments.core.pairwise_judge import HumanPreference, human_agreement, judge_rows
from experiments.models import Protocol, Run


def judge_run(campaign: RatingCampaign) -> Run | None:
    """The latest finished pairwise-judge run over the campaign's run, or None."""
    return (Run.objects.filter(protocol__regrade_of=campaign.run_id, protocol__kind=Protocol.Kind.PAIRWISE,
                               status=Run.Status.FINISHED).select_related("protocol").order_by("-pk").first())


def llm_judge_beside_people(campaign: RatingCampaign, win_rates: list[dict]) -> dict | None:
    """{run, stand_in, rows} for the page, or None without a pairwise-judge run. A row per pair of
    the campaign: people's win rates (as the page computed them), the judge's over the same items,
    the judge's position bias and consistency, and the agreement of people with the judge."""
    run = judge_run(campaign)
    if run is None:
        return None
    seed, draws = bootstrap_settings(campaign)
    items = dict(RatingItem.objects.filter(campaign=campaign).values_list("number", "task_id"))
    wanted = {(task_id, *conditions) for task_id, conditions in
              RatingItem.objects.filter(campaign=campaign).values_list("task_id", "conditions")}
    judged = [p for p in judged_pairs(run) if (p.task, p.x, p.y) in wanted]
    ratings = [HumanPreference(task=items[r.item], person=r.person, x=r.x, y=r.y, outcome=r.outcome)
               for r in pair_ratings(campaign)]
    judge = {(r["x"], r["y"]): r for r in judge_rows(judged, seed=seed, draws=draws)}
    agreement = {(r["x"], r["y"]): r for r in human_agreement(ratings, judged, seed=seed, draws=draws)}
    people = {(r["x"], r["y"]): r for r in win_rates}
    pairs = [(p["x"], p["y"]) for p in campaign.pairs]
    rows = [{"x": x, "y": y, "people": people.get((x, y)), "judge": judge.get((x, y)),
             "agreement": agreement.get((x, y))} for x, y in pairs
            if (x, y) in people or (x, y) in judge]  # a pair without items has nothing to show
    return {"run": run, "stand_in": stand_in(run), "rows": rows, "covered": bool(judge)}
