"""The audit log: who opened which participant text and who exported what.

One row per page view of a session's transcript or a task's texts, per export and per change of
the project's members; written only by `experiments.data.audit_log`, read by owners on the project's audit page.
"""
from django.conf import settings
from django.db import models

from experiments.models.data import Project


class AuditEntry(models.Model):
    class Kind(models.TextChoices):
        SESSION = "session", "Opened a session's transcript"
        TASK = "task", "Opened a task's texts"
        EXPORT = "export", "Exported"
        MEMBER = "member", "Changed the members"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="audit_entries")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    # Kept when the account is deleted: the log must still say who it was.
    username = models.CharField(max_length=150)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    target = models.CharField(max_length=300, help_text="what was opened or exported, in words")
    path = models.CharField(max_length=500, help_text="the page or file asked for")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [
            # the owners' page: newest first within a project, filtered by user or kind
            models.Index(fields=["project", "-at"], name="audit_project_time"),
            models.Index(fields=["project", "username", "-at"], name="audit_project_user"),
            models.Index(fields=["project", "kind", "-at"], name="audit_project_kind"),
        ]

    def __str__(self):
        return f"{self.username} {self.kind} {self.target}"
