"""The audit log's one writer: every view that shows participant text or sends an
export calls `audit_record` once, after its access check passed and before it answers; every
change of a project's members is recorded by `experiments.data.members` through `audit_write`, in the
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


class AuditedTextAdmin:
    """Admin mixin for models holding participant text: opening one (its change
    view, read-only or not) or a page of its list writes an audit entry, as the site's own pages do.

    `audit_project` is the lookup from the model to its project; `audit_kind` the entry's kind.
    A list page spanning projects writes one entry in each project whose rows it shows.
    """

    audit_project = "project"
    audit_kind = Kind.SESSION

    def change_view(self, request, object_id, form_url="", extra_context=None):
        response = super().change_view(request, object_id, form_url, extra_context)
        if response.status_code == 200 and request.method == "GET":
            from django.contrib.admin.utils import unquote
            found = self.model._default_manager.filter(pk=unquote(object_id)).values_list(self.audit_project, flat=True)
            for project_id in found:
                audit_write_for(request, project_id, self.audit_kind,
                                f"admin: {self.model._meta.verbose_name} {object_id}")
        return response

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context)
        changelist = (getattr(response, "context_data", None) or {}).get("cl")
        if response.status_code == 200 and changelist is not None:
            shown = changelist.result_list.values_list("pk", self.audit_project)
            per_project: dict = {}
            for pk, project_id in shown:
                per_project.setdefault(project_id, []).append(pk)
            for project_id, pks in per_project.items():
                audit_write_for(request, project_id, self.audit_kind,
                                f"admin: list of {self.model._meta.verbose_name_plural}, page {changelist.page_num}"
                                f" ({len(pks)} rows)")
        return response


def audit_write_for(request, project_id, kind: str, target: str) -> AuditEntry:
    return AuditEntry.objects.create(
        project_id=project_id, user=request.user, username=request.user.get_username(), kind=kind,
        target=target[:300], path=request.get_full_path()[:500])
