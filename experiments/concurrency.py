"""A Redis-backed in-flight cap per provider, shared by every worker on every machine.

Each holder adds a token with an expiry to a sorted set; expired tokens (a worker that
died holding one) are dropped before counting, so a crash never shrinks the cap for good.
"""
from __future__ import annotations

import time
import uuid
from contextlib import contextmanager

import redis

KEY_PREFIX = "ownwords:inflight:"
POLL_S = 0.02

# KEYS[1] the set; ARGV: now, expiry, cap, token. Returns 1 when the token got a place.
_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
  return 1
end
return 0
"""


class InflightLimiter:
    def __init__(self, client: redis.Redis):
        self.client = client
        self._acquire = client.register_script(_ACQUIRE)

    @contextmanager
    def hold(self, name: str, cap: int, *, lease_s: float):
        """Wait for one of `cap` places under `name`; hold it for the block (at most lease_s)."""
        key = KEY_PREFIX + name
        token = uuid.uuid4().hex
        while True:
            now = time.time()
            if self._acquire(keys=[key], args=[now, now + lease_s, cap, token]):
                break
            time.sleep(POLL_S)
        try:
            yield
        finally:
            self.client.zrem(key, token)

    def in_flight(self, name: str) -> int:
        key = KEY_PREFIX + name
        self.client.zremrangebyscore(key, "-inf", time.time())
        return self.client.zcard(key)


class NoLimiter:
    """For inline runs (one process, one request at a time): nothing to share."""

    @contextmanager
    def hold(self, name: str, cap: int, *, lease_s: float):
        yield

    def in_flight(self, name: str) -> int:
        return 0
