"""Owners' side of a rating campaign: create it over a finished run, manage raters, gold, close.

Every function checks its input and raises CampaignError with a message for people; on
error nothing is written (each runs in one transaction).
"""
from __future__ import annotations

import statistics
from collections import defaultdict

from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from annotations import sampling
from annotations.campaign_rules import check_ratings_per_item, checked_name, checked_raters, rater_users, sampled_items
from annotations.pairwise import is_pairwise, sampling_sides
from annotations.models import (
    FIRST_SHOWING, REPEAT_SHOWING, Assignment, CampaignRater, RatingCampaign, RatingEvent, RatingItem,
)
from experiments.core.conditions import FINAL
from experiments.data.audit_log import Kind, audit_write
from experiments.models import Grade, Prediction, Run

MAX_REPEAT_PERCENT = 50


class CampaignError(ValueError):
    """Input an owner can fix; the message says how."""


def rateable_items(run: Run, conditions: list[str]) -> list[dict]:
    """The distinct answered texts of `conditions` in `run`, one dict per (task, answer sha).

    Empty answers and invalid selections are operational zeros, not answers: nobody rates them.
    """
    judge = {
        (task_id, sha): score
        for task_id, sha, score in Grade.objects.filter(run=run).values_list("task_id", "answer_sha256", "score")
    }
    items: dict[tuple[int, str], dict] = {}
    rows = (
        Prediction.objects.filter(run=run, label=FINAL, condition__in=conditions, status=Prediction.Status.OK)
        .exclude(answer_sha256="")
        .order_by("task_id", "pk")
        .values_list("pk", "task_id", "answer_sha256", "condition")
    )
    order = {c: i for i, c in enumerate(conditions)}
    for pk, task_id, sha, condition in rows:
        item = items.setdefault((task_id, sha), {
            "task_id": task_id, "answer_sha256": sha, "prediction_id": pk, "conditions": [],
            "judge_score": judge.get((task_id, sha)),
        })
        item["conditions"].append(condition)
    for item in items.values():
        item["conditions"].sort(key=order.__getitem__)
    return list(items.values())


def _stratum(item: dict) -> str:
    # The first included condition that produced the text: one stratum per item.
    grade = "missing" if item["judge_score"] is None else item["judge_score"]
    return f"{item['conditions'][0]} | judge {grade}"


@transaction.atomic
def campaign_create(*, run: Run, name: str, conditions: list[str], raters: list[str], user=None,
                    sample: str = RatingCampaign.Sample.ALL, sample_size: int | None = None,
                    seed: int = 1, ratings_per_item: int = 2, repeat_percent: int = 0,
                    qualification_percent: int = 0) -> RatingCampaign:
    """A campaign over a finished run, its items and every rater's queue (with `repeat_percent`
    of each rater's items shown to them again later: hidden repeats, `sampling.with_repeats`)."""
    project = run.protocol.project
    name = checked_name(run, name, error=CampaignError)
    if not conditions:
        raise CampaignError("choose at least one condition to rate")
    unknown = [c for c in conditions if c not in run.protocol.conditions]
    if unknown:
        raise CampaignError(f"not a condition of this run: {', '.join(unknown)}")
    conditions = [c for c in run.protocol.conditions if c in set(conditions)]
    check_ratings_per_item(ratings_per_item, error=CampaignError)
    if not 0 <= repeat_percent <= MAX_REPEAT_PERCENT:
        raise CampaignError(f"hidden repeats are between 0 and {MAX_REPEAT_PERCENT} percent of a rater's items")
    if not 0 <= qualification_percent <= 100:
        raise CampaignError("the pass mark is a percentage, 0 to 100")
    users = checked_raters(project, raters, ratings_per_item, error=CampaignError)
    items = rateable_items(run, conditions)
    if not items:
        raise CampaignError("these conditions produced no answer to rate")
    items, sample_size = sampled_items(items, [_stratum(i) for i in items], sample, sample_size, seed,
                                       error=CampaignError)

    campaign = RatingCampaign.objects.create(
        project=project, run=run, name=name, conditions=conditions, sample=sample, sample_size=sample_size,
        seed=seed, ratings_per_item=ratings_per_item, repeat_percent=repeat_percent,
        qualification_percent=qualification_percent, created_by=user,
    )
    CampaignRater.objects.bulk_create([CampaignRater(campaign=campaign, user=u) for u in users])
    rows = RatingItem.objects.bulk_create([
        RatingItem(campaign=campaign, task_id=i["task_id"], answer_sha256=i["answer_sha256"],
                   prediction_id=i["prediction_id"], conditions=i["conditions"], stratum=_stratum(i),
                   judge_score=i["judge_score"], number=n)
        for n, i in enumerate(items, start=1)
    ])
    if not all(r.pk for r in rows):  # databases without RETURNING: read the ids back
        rows = list(campaign.items.order_by("number"))
    queues = sampling.assign(len(rows), [u.pk for u in users], ratings_per_item, seed)
    # Created rater by rater in queue order, so ids follow queue positions and say nothing
    # about conditions, which items are the same, or which showing is a repeat. Each rater's
    # repeats draw from their own stream (seed, rater's place), fixed by the campaign's seed.
    Assignment.objects.bulk_create([
        Assignment(campaign=campaign, item=rows[i], rater_id=rater_id, position=position,
                   showing=REPEAT_SHOWING if repeat else FIRST_SHOWING)
        for n, (rater_id, queue) in enumerate(queues.items())
        for position, (i, repeat) in enumerate(sampling.with_repeats(queue, repeat_percent, seed + n + 1))
    ], batch_size=5000)
    return campaign


def _open_campaign(campaign: RatingCampaign) -> RatingCampaign:
    campaign = RatingCampaign.objects.select_for_update().get(pk=campaign.pk)
    if not campaign.is_open():
        raise CampaignError("this campaign is closed")
    return campaign


@transaction.atomic
def rater_add(*, campaign: RatingCampaign, username: str) -> CampaignRater:
    """Add (or re-activate) a rater; they get items when an owner reassigns open ones to them."""
    campaign = _open_campaign(campaign)
    (user,) = rater_users(campaign.project, [username], error=CampaignError)
    rater, created = CampaignRater.objects.get_or_create(campaign=campaign, user=user)
    if not created:
        if rater.active:
            raise CampaignError(f"{username} already rates this campaign")
        rater.active = True
        rater.save(update_fields=["active"])
    return rater


@transaction.atomic
def rater_remove(*, campaign: RatingCampaign, username: str, by=None, path: str = "") -> int:
    """Deactivate a rater and hand their open items to the others; returns how many moved.

    Recorded in the project's audit log (who removed whom, how many items moved), in the same transaction.
    """
    campaign = _open_campaign(campaign)
    rater = CampaignRater.objects.filter(campaign=campaign, user__username=username, active=True).first()
    if rater is None:
        raise CampaignError(f"{username} is not an active rater of this campaign")
    rater.active = False
    rater.save(update_fields=["active"])
    moved = _reassign_open(campaign, rater.user_id, by=by)
    audit_write(project=campaign.project, user=by, kind=Kind.MEMBER, path=path,
                target=f"removed {username} as a rater of campaign {campaign.name} ({moved} open items moved)")
    return moved


def _reassign_open(campaign: RatingCampaign, from_user_id: int, *, by=None) -> int:
    open_rows = list(
        Assignment.objects.select_for_update()
        .filter(campaign=campaign, rater_id=from_user_id, status=Assignment.Status.OPEN)
        .order_by("position")
    )
    # A hidden repeat retests its own rater: another rater's first showing of it would be a
    # second rating of the item by them. It is withdrawn (kept, marked reassigned), not moved.
    repeats = [a for a in open_rows if a.showing == REPEAT_SHOWING]
    open_rows = [a for a in open_rows if a.showing == FIRST_SHOWING]
    if repeats:
        Assignment.objects.filter(pk__in=[a.pk for a in repeats]).update(status=Assignment.Status.REASSIGNED)
        RatingEvent.objects.bulk_create([RatingEvent(assignment=a, kind=RatingEvent.Kind.REASSIGN,
                                                     at=timezone.now(), by=by) for a in repeats])
    if not open_rows:
        return 0
    others = list(CampaignRater.objects.filter(campaign=campaign, active=True)
                  .exclude(user_id=from_user_id).values_list("user_id", flat=True))
    if not others:
        raise CampaignError("no other active rater to take the open items; add a rater first")
    holders: dict[int, set] = defaultdict(set)
    for item_id, rater_id in Assignment.objects.filter(item_id__in=[a.item_id for a in open_rows]).values_list(
            "item_id", "rater_id"):
        holders[item_id].add(rater_id)
    loads = dict.fromkeys(others, 0)
    for rater_id, n in (Assignment.objects.filter(campaign=campaign, rater_id__in=others,
                                                  status=Assignment.Status.OPEN)
                        .values_list("rater").annotate(n=Count("pk"))):
        loads[rater_id] = n
    try:
        moved = sampling.reassign([a.item_id for a in open_rows], holders, loads)
    except ValueError as e:
        raise CampaignError(f"cannot reassign: {e}; add a rater first") from None
    ends = dict.fromkeys(others, -1)
    for rater_id, last in (Assignment.objects.filter(campaign=campaign, rater_id__in=others)
                           .values_list("rater").annotate(last=Max("position"))):
        ends[rater_id] = last
    now = timezone.now()
    new_rows = []
    for row in open_rows:
        rater_id = moved[row.item_id]
        ends[rater_id] += 1
        # A pair keeps the sides it was shown with (None for a grade item): the departing queue's
        # balance moves with it, and no moved pair defaults to one side.
        new_rows.append(Assignment(campaign=campaign, item_id=row.item_id, rater_id=rater_id,
                                   position=ends[rater_id], x_on_a=row.x_on_a))
    Assignment.objects.filter(pk__in=[a.pk for a in open_rows]).update(status=Assignment.Status.REASSIGNED)
    RatingEvent.objects.bulk_create([RatingEvent(assignment=a, kind=RatingEvent.Kind.REASSIGN, at=now, by=by)
                                     for a in open_rows])
    Assignment.objects.bulk_create(new_rows)
    return len(new_rows)


@transaction.atomic
def assignments_reassign(*, campaign: RatingCampaign, username: str, by=None) -> int:
    """Move the open items of `username` (who stays a rater) to the other active raters."""
    campaign = _open_campaign(campaign)
    if not CampaignRater.objects.filter(campaign=campaign, user__username=username).exists():
        raise CampaignError(f"{username} is not a rater of this campaign")
    user_id = CampaignRater.objects.get(campaign=campaign, user__username=username).user_id
    return _reassign_open(campaign, user_id, by=by)


@transaction.atomic
def open_items_deal(*, campaign: RatingCampaign, by=None, path: str = "") -> dict[str, int]:
    """Give each active rater who holds no item yet (a new rater) a fair share of the others' open items.

    A share is the open items over all active raters. Only first showings nobody has seen yet move,
    from the most loaded rater's end of queue, never to a rater who held that item before and never
    when its rater has a hidden repeat of it; the rows moved stay, marked reassigned. A new rater
    gets the campaign's share of hidden repeats of their dealt items, as the first raters did
    (`sampling.with_repeats`, their own stream: the campaign's seed and their user id), and in a
    pairwise campaign sides drawn for their queue (`pairwise.sampling_sides`, balanced). Returns how
    many items each new rater got (first showings); recorded in the audit log.
    """
    campaign = _open_campaign(campaign)
    active = list(CampaignRater.objects.filter(campaign=campaign, active=True).select_related("user")
                  .order_by("user__username"))
    current = Assignment.objects.filter(campaign=campaign).exclude(status=Assignment.Status.REASSIGNED)
    holding = set(current.values_list("rater_id", flat=True).distinct())
    new = [r for r in active if r.user_id not in holding]
    givers = [r.user_id for r in active if r.user_id in holding]
    if not new:
        raise CampaignError("every active rater holds items already: there is no new rater to deal to")
    loads = dict.fromkeys(givers, 0)
    for rater_id, n in (current.filter(rater_id__in=givers, status=Assignment.Status.OPEN)
                        .values_list("rater").annotate(n=Count("pk"))):
        loads[rater_id] = n
    share = sum(loads.values()) // (len(givers) + len(new))
    if share == 0:
        raise CampaignError("too few open items to share with the new raters")
    repeats = set(current.filter(showing=REPEAT_SHOWING).values_list("rater_id", "item_id"))
    stacks = defaultdict(list)  # giver → movable rows, end of queue first
    for a in (Assignment.objects.select_for_update()
              .filter(campaign=campaign, rater_id__in=givers, status=Assignment.Status.OPEN, showing=FIRST_SHOWING,
                      served_at__isnull=True).order_by("rater_id", "-position")):
        if (a.rater_id, a.item_id) not in repeats:
            stacks[a.rater_id].append(a)
    moved, new_rows, dealt = [], [], {}
    for rater in new:
        held = set(Assignment.objects.filter(campaign=campaign, rater_id=rater.user_id).values_list("item_id", flat=True))
        position = (Assignment.objects.filter(campaign=campaign, rater_id=rater.user_id)
                    .aggregate(last=Max("position"))["last"])
        position = -1 if position is None else position
        got, queue = 0, []
        while got < share:
            giver = next((g for g in sorted(stacks, key=lambda g: (-loads[g], g))
                          if any(a.item_id not in held for a in stacks[g])), None)
            if giver is None:
                break
            row = next(a for a in stacks[giver] if a.item_id not in held)
            stacks[giver].remove(row)
            loads[giver] -= 1
            held.add(row.item_id)
            got += 1
            moved.append(row)
            queue.append(row.item_id)
        shown = sampling.with_repeats(queue, campaign.repeat_percent, [campaign.seed, rater.user_id])
        # A pair item's sides: drawn for the dealt queue as for the first raters' (balanced, seeded).
        sides = [None] * len(shown)
        if is_pairwise(campaign):
            conditions = dict(RatingItem.objects.filter(pk__in=queue).values_list("pk", "conditions"))
            sides = sampling_sides([{"x": conditions[i][0], "y": conditions[i][1]} for i, _ in shown],
                                   campaign.seed + rater.user_id)
        for (item_id, repeat), x_on_a in zip(shown, sides):
            position += 1
            new_rows.append(Assignment(campaign=campaign, item_id=item_id, rater_id=rater.user_id, position=position,
                                       showing=REPEAT_SHOWING if repeat else FIRST_SHOWING, x_on_a=x_on_a))
        dealt[rater.user.get_username()] = got
    now = timezone.now()
    Assignment.objects.filter(pk__in=[a.pk for a in moved]).update(status=Assignment.Status.REASSIGNED)
    RatingEvent.objects.bulk_create([RatingEvent(assignment=a, kind=RatingEvent.Kind.REASSIGN, at=now, by=by)
                                     for a in moved])
    Assignment.objects.bulk_create(new_rows)
    audit_write(project=campaign.project, user=by, kind=Kind.MEMBER, path=path,
                target=f"dealt open items of campaign {campaign.name} to new raters: "
                       + ", ".join(f"{name} {n}" for name, n in dealt.items()))
    return dealt


@transaction.atomic
def gold_set(*, campaign: RatingCampaign, number: int, grade: int | None) -> RatingItem:
    """Make item `number` a gold item with the owner's `grade` (None: no longer gold)."""
    campaign = _open_campaign(campaign)
    if is_pairwise(campaign):
        raise CampaignError("a pairwise campaign has no gold grades: its items are choices between two answers")
    if campaign.kind != "grade":
        raise CampaignError("a content-check campaign has no gold grades: its items are yes / partly / no answers")
    if grade is not None and grade not in (0, 1, 2, 3):
        raise CampaignError("a gold grade is 0, 1, 2 or 3")
    item = RatingItem.objects.filter(campaign=campaign, number=number).first()
    if item is None:
        raise CampaignError(f"this campaign has no item {number}")
    item.gold_grade = grade
    item.save(update_fields=["gold_grade"])
    return item


@transaction.atomic
def campaign_close(*, campaign: RatingCampaign) -> RatingCampaign:
    campaign = _open_campaign(campaign)
    campaign.status = RatingCampaign.Status.CLOSED
    campaign.closed_at = timezone.now()
    campaign.save(update_fields=["status", "closed_at"])
    return campaign


def campaign_progress(campaign: RatingCampaign) -> list[dict]:
    """Per rater: assigned, done, open, reassigned away, flagged, median seconds, active."""
    counts = {
        row["rater"]: row
        for row in Assignment.objects.filter(campaign=campaign).values("rater").annotate(
            assigned=Count("pk", filter=~Q(status=Assignment.Status.REASSIGNED)),
            done=Count("pk", filter=Q(status=Assignment.Status.DONE)),
            open=Count("pk", filter=Q(status=Assignment.Status.OPEN)),
            moved=Count("pk", filter=Q(status=Assignment.Status.REASSIGNED)),
            flagged=Count("pk", filter=Q(rating__flagged=True)),
        )
    }
    seconds = defaultdict(list)
    for rater_id, s in Assignment.objects.filter(campaign=campaign, rating__seconds_spent__isnull=False).values_list(
            "rater", "rating__seconds_spent"):
        seconds[rater_id].append(s)
    rows = []
    for rater in CampaignRater.objects.filter(campaign=campaign).select_related("user"):
        c = counts.get(rater.user_id, {})
        times = seconds.get(rater.user_id, [])
        rows.append({
            "username": rater.user.username, "active": rater.active,
            "assigned": c.get("assigned", 0), "done": c.get("done", 0), "open": c.get("open", 0),
            "moved": c.get("moved", 0), "flagged": c.get("flagged", 0),
            "median_seconds": round(statistics.median(times), 1) if times else None,
        })
    return rows
