"""Access checks for project pages (DESIGN §2), in one place.

Every view starts with `membership_for(request, slug, roles=...)`: a project the
user is not a member of does not exist for them (404); a member whose role may not
use the page gets 403.
"""
from django.core.exceptions import PermissionDenied
from django.http import Http404

from experiments.models import Membership, Role

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
