"""The audit log's one writer (issue 12): every view that shows participant text or sends an
export calls `audit_record` once, after its access check passed and before it answers."""
from __future__ import annotations

from experiments.models import AuditEntry

Kind = AuditEntry.Kind


def audit_record(request, project, kind: str, target: str) -> AuditEntry:
    """Record that the request's user opened or exported `target` of `project`."""
    user = request.user
    return AuditEntry.objects.create(
        project=project, user=user, username=user.get_username(), kind=kind,
        target=target[:300], path=request.get_full_path()[:500],
    )
