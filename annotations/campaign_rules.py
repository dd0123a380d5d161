"""What every new rating campaign must satisfy, whatever its kind (grades, `campaigns`; pairs,
`pairwise`; original-paraphrase pairs, `content_check`): one statement of the shared checks and of the
sample. Each raises the caller's own error class, so a
page catches what it always caught; nothing is written here."""
from __future__ import annotations

from annotations import sampling
from annotations.models import RatingCampaign
from experiments.models import Membership, Role, Run

MAX_RATINGS_PER_ITEM = 5


def checked_name(run: Run, name: str, *, error: type[Exception]) -> str:
    """The campaign's name, stripped: present, new in the run's project, and the run finished."""
    name = (name or "").strip()
    if not name:
        raise error("a campaign needs a name")
    if RatingCampaign.objects.filter(project=run.protocol.project, name=name).exists():
        raise error(f"a campaign called {name!r} already exists in this project")
    if run.status != Run.Status.FINISHED:
        raise error(f"run {run.pk} is {run.get_status_display().lower()}; rate a finished run")
    return name


def rater_users(project, usernames: list[str], *, error: type[Exception]) -> list:
    """The accounts of `usernames`, in that order, each a member of `project` with the rater role."""
    found = {m.user.username: m for m in
             Membership.objects.select_related("user").filter(project=project, user__username__in=usernames)}
    for name in usernames:
        if name not in found:
            raise error(f"{name} is not a member of this project")
        if found[name].role != Role.RATER:
            raise error(f"{name} is {found[name].get_role_display().lower()}, not a rater, in this project")
    return [found[name].user for name in usernames]


def check_ratings_per_item(ratings_per_item: int, *, error: type[Exception]) -> None:
    if not 1 <= ratings_per_item <= MAX_RATINGS_PER_ITEM:
        raise error(f"ratings per item must be between 1 and {MAX_RATINGS_PER_ITEM}")


def checked_raters(project, raters: list[str], ratings_per_item: int, *, error: type[Exception]) -> list:
    """The raters' accounts: each listed once, a rater of `project`, and at least `ratings_per_item` of them."""
    if len(set(raters)) != len(raters):
        raise error("a rater is listed twice")
    users = rater_users(project, raters, error=error)
    if len(users) < ratings_per_item:
        raise error(f"{ratings_per_item} ratings per item need at least {ratings_per_item} raters; "
                    f"{len(users)} chosen")
    return users


def sampled_items(items: list, strata: list, sample: str, sample_size: int | None, seed: int, *,
                  error: type[Exception]) -> tuple[list, int | None]:
    """(the items a campaign keeps, the sample size it records): all of them (size None), or a seeded sample
    of `sample_size` stratified by `strata` (one per item) and spread over the items' tasks."""
    if sample == RatingCampaign.Sample.STRATIFIED:
        if not sample_size or sample_size < 1:
            raise error("a stratified sample needs a size of at least 1")
        if sample_size < len(items):
            keep = sampling.stratified_sample(strata, [i["task_id"] for i in items], sample_size, seed)
            items = [items[i] for i in keep]
        return items, sample_size
    if sample != RatingCampaign.Sample.ALL:
        raise error(f"unknown sample kind {sample!r}")
    return items, None
