"""Personal API tokens: a user's key to the read-only JSON API (`experiments.web.api`).

Only the sha256 of a token is stored; the token itself is shown once, when it is created. A token
acts as its user, with that user's roles per project at the time of each request; a revoked token
opens nothing.
"""
from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="the owner's own label, e.g. 'laptop notebook'")
    key_sha256 = models.CharField(max_length=64, unique=True, help_text="sha256 (hex) of the token")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return f"{self.user} · {self.name}{' (revoked)' if self.revoked_at else ''}"
