"""Access checks for project pages (DESIGN §2), in one place.

Every view starts with `membership_for(request, slug, roles=...)`: a project the
user is not a member of does not exist for them (404); a member whose role may not
use the page gets 403.
"""
from django.core.exceptions import PermissionDenied
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
    """(membership, run) for run `pk` of project `slug`, checked against `roles`."""
    membership = membership_for(request, slug, roles=roles)
    run = (
        Run.objects.select_related("protocol__cohort", "protocol__sealed_by", "created_by")
        .filter(protocol__project=membership.project, pk=pk)
        .first()
    )
    if run is None:
        raise Http404("No such run")
    return membership, run


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
