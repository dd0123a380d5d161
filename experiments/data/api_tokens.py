"""Personal API tokens: created (the token shown once, its sha256 kept), revoked, and looked up by the API.

A token is `ow_` and 43 URL-safe characters (32 random bytes). The database holds only its sha256,
so a copy of the database opens nothing; the lookup hashes what the client sent and compares hashes.
"""
from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.utils import timezone

from experiments.models import ApiToken

PREFIX = "ow_"
# `last_used_at` is written at most this often per token: a notebook paging through a run sends
# many requests a second, and each would otherwise write the row.
LAST_USED_RESOLUTION = timedelta(seconds=60)


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_create(user, name: str) -> tuple[ApiToken, str]:
    """A new token of `user`: (its row, the token itself — shown once, never stored)."""
    token = PREFIX + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(user=user, name=name.strip()[:100] or "token", key_sha256=token_sha256(token))
    return row, token


def token_revoke(user, pk: int) -> bool:
    """Revoke `user`'s token `pk` (another user's token is not found): whether one was revoked now."""
    return bool(ApiToken.objects.filter(user=user, pk=pk, revoked_at__isnull=True).update(revoked_at=timezone.now()))


def token_user(token: str) -> ApiToken | None:
    """The live token row (with its active user) for `token`, or None: unknown, revoked, or its user inactive.

    Marks it used (at most once per LAST_USED_RESOLUTION).
    """
    if not token or len(token) > 200:
        return None
    row = ApiToken.objects.select_related("user").filter(key_sha256=token_sha256(token)).first()
    if row is None or row.revoked_at is not None or not row.user.is_active:
        return None
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
        row.last_used_at = now
    return row
