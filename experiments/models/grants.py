"""Who may spend on a paid endpoint: the administrator's grants.

A grant names an endpoint of the administrator's list (`settings.LLM_ENDPOINTS`, by name) and one
user or one group. Sealing, starting and amending runs of a protocol that sends to a paid endpoint
need a grant for it, on top of the project role (`experiments.access.may_spend`); the offline
stand-in needs none. Granted in /admin/ or with `manage.py endpoint_grants`.
"""
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q
from django.utils import timezone


class EndpointGrant(models.Model):
    endpoint = models.CharField(max_length=200, help_text="the endpoint's name in OWNWORDS_LLM_ENDPOINTS")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="endpoint_grants")
    group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.CASCADE, related_name="endpoint_grants")
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    granted_at = models.DateTimeField(default=timezone.now)
    note = models.CharField(max_length=500, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(user__isnull=False, group__isnull=True)
                                   | Q(user__isnull=True, group__isnull=False), name="grant_user_xor_group"),
            models.UniqueConstraint(fields=["endpoint", "user"], name="grant_unique_user"),
            models.UniqueConstraint(fields=["endpoint", "group"], name="grant_unique_group"),
        ]

    def holder(self) -> str:
        return f"user {self.user.get_username()}" if self.user_id else f"group {self.group.name}"

    def __str__(self):
        return f"{self.endpoint}: {self.holder()}"
