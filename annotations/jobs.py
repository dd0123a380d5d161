"""RQ job of the annotations app: a large campaign's results, on the `analysis` queue.

One job per state of the ratings: a Redis key named by the inputs' sha256 (set if absent)
keeps a page that is reloaded while the numbers are computed from queueing them again.
"""
from __future__ import annotations

import django_rq
import redis

from annotations.campaign_agreement import campaign_results
from annotations.content_check import content_check_results, is_content_check
from annotations.pairwise import is_pairwise, pairwise_results
from annotations.models import RatingCampaign

QUEUED_KEY = "ownwords:campaign-results:{queue}:{campaign_id}:{sha}"
QUEUED_TTL_S = 3600


def job_campaign_results(campaign_id: int, queued_key: str = "") -> None:
    try:
        campaign = RatingCampaign.objects.select_related("run__protocol").filter(pk=campaign_id).first()
        if campaign is not None:  # deleted meanwhile: nothing to compute
            compute = (pairwise_results if is_pairwise(campaign)
                       else content_check_results if is_content_check(campaign) else campaign_results)
            compute(campaign)
    finally:
        if queued_key:  # a failed job must not block the next try for an hour
            results_queue().connection.delete(queued_key)


def results_queue():
    return django_rq.get_queue("analysis")


def results_enqueue(campaign_id: int, sha: str) -> bool:
    """Queue the computation once per input state; False when no queue answers."""
    queue = results_queue()
    key = QUEUED_KEY.format(queue=queue.name, campaign_id=campaign_id, sha=sha)
    try:
        if queue.connection.set(key, 1, nx=True, ex=QUEUED_TTL_S):
            queue.enqueue(job_campaign_results, campaign_id, key, job_timeout=QUEUED_TTL_S)
    except (redis.RedisError, OSError):
        return False
    return True
