"""A Redis-backed in-flight cap per provider, shared by every worker on every machine.

Each holder adds a token with an expiry to a sorted set; expired tokens (a worker that
died holding one) are dropped before counting, so a crash never shrinks the cap for good.
Times are Redis's own clock (TIME inside the scripts), so machines whose clocks disagree
still agree on when a token expires.

A waiter does not poll: it blocks on a wake-up list that each release pushes to, so a
freed place is taken within a round trip (one release wakes one waiter, in arrival
order). The wait is bounded by `WAKE_TIMEOUT_S`, after which the waiter looks again anyway:
that is how a place freed by an expiry, which pushes nothing, is found.
"""
from __future__ import annotations

import uuid
from contextlib import contextmanager

import redis

KEY_PREFIX = "ownwords:inflight:"
WAKE_SUFFIX = ":wake"
WAKE_TIMEOUT_S = 0.25

# KEYS[1] the set; ARGV: cap, lease in seconds, token. Returns 1 when the token got a place.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  local keep = math.ceil(tonumber(ARGV[2]) * 1000) + 60000
  if redis.call('PTTL', KEYS[1]) < keep then redis.call('PEXPIRE', KEYS[1], keep) end
  return 1
end
return 0
"""

# KEYS[1] the set, KEYS[2] the wake-up list; ARGV: token, cap. Frees the place, wakes one waiter.
_RELEASE = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[2], '1')
  redis.call('LTRIM', KEYS[2], -tonumber(ARGV[2]), -1)
  redis.call('PEXPIRE', KEYS[2], 5000)
end
return 1
"""

_COUNT = """
local t = redis.call('TIME')
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(t[1]) + tonumber(t[2]) / 1000000)
return redis.call('ZCARD', KEYS[1])
"""


class InflightLimiter:
    def __init__(self, client: redis.Redis):
        self.client = client
        self._acquire = client.register_script(_ACQUIRE)
        self._release = client.register_script(_RELEASE)
        self._count = client.register_script(_COUNT)

    @contextmanager
    def hold(self, name: str, cap: int, *, lease_s: float):
        """Wait for one of `cap` places under `name`; hold it for the block (at most lease_s)."""
        key = KEY_PREFIX + name
        wake = key + WAKE_SUFFIX
        token = uuid.uuid4().hex
        while not self._acquire(keys=[key], args=[cap, lease_s, token]):
            self.client.blpop([wake], timeout=WAKE_TIMEOUT_S)
        try:
            yield
        finally:
            self._release(keys=[key, wake], args=[token, max(int(cap), 1)])

    def in_flight(self, name: str) -> int:
        return int(self._count(keys=[KEY_PREFIX + name]))


class NoLimiter:
    """For inline runs (one process, one request at a time): nothing to share."""

    @contextmanager
    def hold(self, name: str, cap: int, *, lease_s: float):
        yield

    def in_flight(self, name: str) -> int:
        return 0
