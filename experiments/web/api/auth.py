"""The API's door: a personal token (`Authorization: Bearer ow_…`) and a fixed-window rate limit per token.

Only the token opens the API: a browser's session cookie does not (the user is set from the token,
whatever the session says), so no request can ride on a logged-in browser and no CSRF check is
needed. An unknown or revoked token, or none, is 401 with a JSON message; more than
OWNWORDS_API_RATE_PER_MINUTE requests of one token in one clock minute is 429 with Retry-After.
The counter is a Redis key per token and minute (INCR, expiring after two minutes), so every web
process shares it; without Redis the limit is not enforced (logged) rather than refusing all work.
"""
from __future__ import annotations

import logging
import math
import time

import django_rq
import redis
from django.conf import settings
from ninja.errors import AuthenticationError, HttpError
from ninja.security import HttpBearer

from experiments.data.api_tokens import token_user

log = logging.getLogger(__name__)

WINDOW_S = 60
MISSING_TOKEN = ("an API token is required: send 'Authorization: Bearer <token>' "
                 "(create one on your account page, /account/tokens/)")
BAD_TOKEN = "unknown or revoked API token"


class RateLimited(HttpError):
    """429: the token's requests of this minute are used up; `retry_after` seconds until the next."""

    def __init__(self, retry_after: int):
        self.retry_after = retry_after
        super().__init__(429, f"rate limit of {settings.OWNWORDS_API_RATE_PER_MINUTE} requests a minute reached; "
                              f"retry after {retry_after} s")


def clock() -> float:
    return time.time()


def rate_check(key_sha256: str) -> None:
    """Count one request of the token with this hash; RateLimited when over the minute's limit."""
    now = clock()
    window = int(now // WINDOW_S)
    key = f"ownwords:api-rate:{key_sha256[:32]}:{window}"
    try:
        pipe = django_rq.get_connection("default").pipeline()
        pipe.incr(key)
        pipe.expire(key, 2 * WINDOW_S)
        count = pipe.execute()[0]
    except (redis.RedisError, OSError) as exc:
        log.warning("API rate limit not enforced: Redis unreachable (%s)", exc)
        return
    if count > settings.OWNWORDS_API_RATE_PER_MINUTE:
        raise RateLimited(max(1, math.ceil((window + 1) * WINDOW_S - now)))


class TokenAuth(HttpBearer):
    """The token's user becomes `request.user` (the access helpers read it); `request.auth` the token row."""

    def __call__(self, request):
        header = request.headers.get("Authorization", "")
        if not header:
            raise AuthenticationError(message=MISSING_TOKEN)
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationError(message=MISSING_TOKEN)
        return self.authenticate(request, token.strip())

    def authenticate(self, request, token):
        row = token_user(token)
        if row is None:
            raise AuthenticationError(message=BAD_TOKEN)
        rate_check(row.key_sha256)
        request.user = row.user
        return row
