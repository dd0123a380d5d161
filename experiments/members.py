"""Projects and their members (issue 12): creating a project, and the owners' member changes.

Every change goes through here, so one rule holds everywhere: a project never loses its last
owner. The owners' rows are locked while a change is checked, so two owners demoting each
other at the same moment cannot both succeed (PostgreSQL; SQLite runs one writer at a time).
"""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from experiments.models import Membership, Project, Role


class MembershipError(Exception):
    """A change that would break a rule; its text says which, for the page."""


def project_create(*, user, name: str, slug: str) -> Project:
    """A new project with `user` as its owner."""
    try:
        with transaction.atomic():
            project = Project.objects.create(name=name, slug=slug)
            Membership.objects.create(project=project, user=user, role=Role.OWNER)
    except IntegrityError:
        raise MembershipError(f"a project with the short name {slug!r} exists already; choose another") from None
    return project


def member_add(*, project: Project, username: str, role: str) -> Membership:
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise MembershipError(f"there is no account called {username!r}; an administrator creates accounts")
    if role not in Role.values:
        raise MembershipError(f"{role!r} is not a role")
    try:
        with transaction.atomic():
            return Membership.objects.create(project=project, user=user, role=role)
    except IntegrityError:
        raise MembershipError(f"{username} is a member already; change their role instead") from None


def member_set_role(*, membership: Membership, role: str) -> Membership:
    if role not in Role.values:
        raise MembershipError(f"{role!r} is not a role")
    with transaction.atomic():
        _check_owner_remains(membership, leaving=role != Role.OWNER)
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


def member_remove(*, membership: Membership) -> None:
    with transaction.atomic():
        _check_owner_remains(membership, leaving=True)
        membership.delete()


def _check_owner_remains(membership: Membership, *, leaving: bool) -> None:
    owners = list(Membership.objects.select_for_update()
                  .filter(project_id=membership.project_id, role=Role.OWNER).values_list("pk", flat=True))
    if leaving and owners == [membership.pk]:
        raise MembershipError(f"{membership.user.get_username()} is the project's only owner; "
                              "make another member an owner first")
