"""Access checks for project pages (DESIGN §2), in one place, and who may spend money (`may_spend`).

Every view starts with `membership_for(request, slug, roles=...)`: a project the
user is not a member of does not exist for them (404); a member whose role may not
use the page gets 403.
"""
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, Subquery
from django.http import Http404

from experiments.models import Membership, Protocol, Role, Run

EVERY_ROLE = frozenset(Role)
TEXT_READERS = frozenset({Role.OWNER, Role.ANALYST})
OWNERS = frozenset({Role.OWNER})


def membership_for(request, slug: str, *, roles=EVERY_ROLE) -> Membership:
    """The user's membership of project `slug`, checked against `roles`."""
    membership = (
        Membership.objects.select_related("project")
        .filter(project__slug=slug, user=request.user)
        .first()
    )
    if membership is None:
        raise Http404("No such project")
    if membership.role not in roles:
        raise PermissionDenied(f"The {membership.role} role cannot use this page")
    return membership


# Every role but the blinded rater: protocols and runs show condition names and aggregate
# counts, which a rater must never see (DESIGN §2), but no participant text.
AGGREGATE_READERS = frozenset({Role.OWNER, Role.ANALYST, Role.VIEWER})


def protocol_for(request, slug: str, pk: int, *, roles=AGGREGATE_READERS):
    """(membership, protocol) for protocol `pk` of project `slug`, checked against `roles`.

    A protocol of another project is not found (404), like the project itself.
    """
    membership = membership_for(request, slug, roles=roles)
    protocol = (
        Protocol.objects.select_related("cohort", "sealed_by", "created_by")
        .filter(project=membership.project, pk=pk)
        .first()
    )
    if protocol is None:
        raise Http404("No such protocol")
    return membership, protocol


def run_for(request, slug: str, pk: int, *, roles=AGGREGATE_READERS):
    """(membership, run) for run `pk` of project `slug`, checked against `roles`.

    One query for both (run pages are polled and paged through): the run of that project with
    the user's membership of it. No run there, or no membership, is the same 404.
    """
    mine = Membership.objects.filter(project=OuterRef("protocol__project"), user=request.user)
    run = (
        Run.objects.select_related("protocol__project", "protocol__cohort", "protocol__sealed_by", "created_by")
        .filter(protocol__project__slug=slug, pk=pk)
        .annotate(member_pk=Subquery(mine.values("pk")[:1]), member_role=Subquery(mine.values("role")[:1]))
        .first()
    )
    if run is None or run.member_pk is None:
        raise Http404("No such run")
    if run.member_role not in roles:
        raise PermissionDenied(f"The {run.member_role} role cannot use this page")
    membership = Membership(pk=run.member_pk, project=run.protocol.project, user=request.user, role=run.member_role)
    return membership, run


# --- who may spend money ---------------------------------------------------------------------

# The offline stand-in costs nothing; every other provider is a paid service.
FREE_PROVIDERS = frozenset({"offline"})


def calls_paid_provider(protocol) -> bool:
    """Whether a run of `protocol` sends requests to a paid provider.

    A re-grade-only protocol sends only its judge's requests (App. H); its generator is a copy.
    """
    configs = [protocol.judge] if protocol.regrade_of_id is not None else [protocol.generator, protocol.judge]
    return any(not isinstance(c, dict) or c.get("provider") not in FREE_PROVIDERS for c in configs)


def may_spend(membership, protocol) -> bool:
    """Whether this member may seal, start, pause, resume, re-issue or continue (accept missing)
    runs of `protocol` — the one rule for every action that spends, or stops spending, money.

    Owners always; analysts for protocols that call no paid provider, and for paid ones only
    when the project delegates spending to them (`Project.analysts_may_spend`). Whoever may
    start a run may also pause it: the same rule decides both. Raters and viewers never.
    """
    if membership is None:
        return False
    if membership.role == Role.OWNER:
        return True
    if membership.role != Role.ANALYST:
        return False
    return membership.project.analysts_may_spend or not calls_paid_provider(protocol)


def spending_refusal(membership, protocol) -> str:
    """Why `may_spend` said no, in words for a page or a shell."""
    if membership is None or membership.role not in TEXT_READERS:
        return "only owners (and analysts the project allows) may seal, start, pause or resume runs"
    return ("this protocol calls a paid provider: only owners may seal, start, pause or resume its runs "
            "(an owner may delegate this to analysts in the project's settings)")


def require_spending(membership, protocol) -> None:
    """PermissionDenied unless `may_spend`; views call this right after their access helper."""
    if not may_spend(membership, protocol):
        raise PermissionDenied(spending_refusal(membership, protocol))


def spender(protocol, username: str):
    """(user, None) when `username` may spend on `protocol`, else (None, why): for management commands."""
    membership = (
        Membership.objects.select_related("user", "project")
        .filter(project_id=protocol.project_id, user__username=username)
        .first()
    )
    if membership is None:
        return None, f"{username!r} is not a member of project '{protocol.project.slug}'"
    if not may_spend(membership, protocol):
        return None, f"{username!r} may not do this: {spending_refusal(membership, protocol)}"
    return membership.user, None


def member_with_role(project, username: str, *, roles):
    """The user called `username` when they hold one of `roles` in `project`, else None.

    Management commands take `--user` to record who acted; the same roles apply as on the pages.
    """
    membership = (
        Membership.objects.select_related("user")
        .filter(project=project, user__username=username, role__in=roles)
        .first()
    )
    return membership.user if membership else None
