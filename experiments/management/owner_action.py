"""What run_pause and run_resume share: the run, a reason, and the owner who acts."""
from django.core.management.base import CommandError

from experiments.access import OWNERS, member_with_role
from experiments.models import Run


def run_and_owner(run_id: int, reason: str, user: str | None):
    """(run, owner or None) for an owner-only amendment from the shell; CommandError otherwise."""
    run = Run.objects.select_related("protocol__project").filter(pk=run_id).first()
    if run is None:
        raise CommandError(f"no run with id {run_id}")
    if not reason.strip():
        raise CommandError("give a reason: amendments are recorded with it")
    project = run.protocol.project
    owner = member_with_role(project, user, roles=OWNERS) if user else None
    if user and owner is None:
        raise CommandError(f"{user!r} is not an owner of project '{project.slug}'")
    return run, owner
