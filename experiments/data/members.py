"""Projects and their members: creating a project, and the owners' member changes.

Every change goes through here, so two rules hold everywhere: a project never loses its last
owner, and every change is in the audit log (who, when, what), written in the change's own
transaction. The owners' rows are locked while a change is checked, so two owners demoting each
other at the same moment cannot both succeed.
`actor` is the account making the change and `path` the page it was made on.
"""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from experiments.data.audit_log import Kind, audit_write
from experiments.models import Membership, Project, Role


class MembershipError(Exception):
    """A change that would break a rule; its text says which, for the page."""


def project_create(*, user, name: str, slug: str, path: str = "") -> Project:
    """A new project with `user` as its owner."""
    try:
        with transaction.atomic():
            project = Project.objects.create(name=name, slug=slug)
            Membership.objects.create(project=project, user=user, role=Role.OWNER)
            audit_write(project=project, user=user, kind=Kind.MEMBER, path=path,
                        target=f"created the project, with {user.get_username()} as its owner")
    except IntegrityError:
        raise MembershipError(f"a project with the short name {slug!r} exists already; choose another") from None
    return project


def project_for_command(*, slug: str, owner: str | None, path: str = "manage.py") -> tuple[Project, str]:
    """Project `slug` for a command that imports into it, and a note for its output.

    A missing project is created, with the account `owner` as its owner through `project_create`
    (so the audit log says who); without `owner` it is created ownerless, visible only to
    superusers, and the note says how to give it one.
    """
    project = Project.objects.filter(slug=slug).first()
    if project is not None:
        return project, (f"--owner ignored: project {slug!r} exists; change its members on its members page"
                         if owner else "")
    if owner is None:
        return Project.objects.create(name=slug, slug=slug), (
            f"project {slug!r} was created without an owner: only superusers see it until one is added "
            "(next time pass --owner USERNAME, or add a membership in /admin/)")
    user = get_user_model().objects.filter(username=owner).first()
    if user is None:
        raise MembershipError(f"there is no account called {owner!r}; an administrator creates accounts")
    return project_create(user=user, name=slug, slug=slug, path=path), ""


def member_ensure(*, project: Project, user, role: str, actor=None, path: str = "") -> Membership:
    """`user` a member of `project` with `role`: added, or their role changed, or left as is (audited
    when something changes, like the owners' own changes)."""
    membership = Membership.objects.filter(project=project, user=user).select_related("user", "project").first()
    if membership is None:
        return member_add(project=project, username=user.get_username(), role=role, actor=actor, path=path)
    return member_set_role(membership=membership, role=role, actor=actor, path=path)


def _role(role: str) -> str:
    return Role(role).label.lower()


def member_add(*, project: Project, username: str, role: str, actor=None, path: str = "") -> Membership:
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise MembershipError(f"there is no account called {username!r}; an administrator creates accounts")
    if role not in Role.values:
        raise MembershipError(f"{role!r} is not a role")
    try:
        with transaction.atomic():
            added = Membership.objects.create(project=project, user=user, role=role)
            audit_write(project=project, user=actor, kind=Kind.MEMBER, path=path,
                        target=f"added {user.get_username()} as {_role(role)}")
            return added
    except IntegrityError:
        raise MembershipError(f"{username} is a member already; change their role instead") from None


def member_set_role(*, membership: Membership, role: str, actor=None, path: str = "") -> Membership:
    if role not in Role.values:
        raise MembershipError(f"{role!r} is not a role")
    with transaction.atomic():
        _check_owner_remains(membership, leaving=role != Role.OWNER)
        before = _current_role(membership)
        if before == role:
            return membership  # nothing changed: nothing to record
        membership.role = role
        membership.save(update_fields=["role"])
        audit_write(project=membership.project, user=actor, kind=Kind.MEMBER, path=path,
                    target=f"changed {membership.user.get_username()}'s role from {_role(before)} to {_role(role)}")
    return membership


def member_remove(*, membership: Membership, actor=None, path: str = "") -> None:
    with transaction.atomic():
        _check_owner_remains(membership, leaving=True)
        role = _current_role(membership)
        membership.delete()
        audit_write(project=membership.project, user=actor, kind=Kind.MEMBER, path=path,
                    target=f"removed {membership.user.get_username()} (was {_role(role)})")


def _check_owner_remains(membership: Membership, *, leaving: bool) -> None:
    owners = list(Membership.objects.select_for_update()
                  .filter(project_id=membership.project_id, role=Role.OWNER).values_list("pk", flat=True))
    if leaving and owners == [membership.pk]:
        raise MembershipError(f"{membership.user.get_username()} is the project's only owner; "
                              "make another member an owner first")


def _current_role(membership: Membership) -> str:
    """The member's role as stored now (locked), for the log; gone meanwhile is an error, not a crash."""
    role = Membership.objects.select_for_update().filter(pk=membership.pk).values_list("role", flat=True).first()
    if role is None:
        raise MembershipError(f"{membership.user.get_username()} is no longer a member")
    return role
