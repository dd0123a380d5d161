"""The audit log's one writer (issue 12): every view that shows participant text or sends an
export calls `audit_record` once, after its access check passed and before it answers; every
change of a project's members is recorded by `experiments.members` through `audit_write`, in the
change's own transaction."""
from __future__ import annotations

from experiments.models import AuditEntry

Kind = AuditEntry.Kind


def audit_record(request, project, kind: str, target: str) -> AuditEntry:
    """Record that the request's user opened or exported `target` of `project`."""
    return audit_write(project=project, user=request.user, kind=kind, target=target, path=request.get_full_path())


def audit_write(*, project, user, kind: str, target: str, path: str = "") -> AuditEntry:
    """One entry: `user` (None for a shell) did `target` (in words) at `path` (the page asked for, if any)."""
    return AuditEntry.objects.create(
        project=project, user=user, username=user.get_username() if user is not None else "(shell)", kind=kind,
        target=target[:300], path=path[:500],
    )
