"""A Redis-backed in-flight cap per provider, shared by every worker on every machine.

Each holder adds a token with an expiry to a sorted set; expired tokens (a worker that
died holding one) are dropped before counting, so a crash never shrinks the cap for good.
Times are Redis's own clock (TIME inside the scripts), so machines whose clocks disagree
still agree on when a token expires.

A waiter does not poll: it blocks on a wake-up list that each release pushes to, so a
freed place is taken within a round trip (one release wakes one waiter, in arrival
order). The wait is bounded by `WAKE_TIMEOUT_S`, after which the waiter looks again anyway:
that is how a place freed by an expiry, which pushes nothing, is found.

Redis may go away for a while (a restart, a network blip). Taking a place then waits with
backoff until Redis answers again: nothing has been sent yet, so waiting costs nothing but
time. Giving a place back never raises: the caller has an answer to record, so a
failed release is logged and retried in the background with backoff until it succeeds or the
place's lease has run out (after which Redis drops the token by itself).
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, replace

import redis

logger = logging.getLogger(__name__)

KEY_PREFIX = "ownwords:inflight:"
WAKE_SUFFIX = ":wake"
# A place freed by a release wakes a waiter at once (the wake-up list); only a place freed by
# an expiry (a dead holder) waits for this. Every waiter asks Redis this often when idle, so
# shorter costs CPU on every host for nothing in the ordinary case.
WAKE_TIMEOUT_S = 1.0

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

# KEYS[1] the set, KEYS[2] the wake-up list; ARGV: token, cap, lease in seconds. A place handed
# from one holder to the next within a process: kept (1, its lease renewed) when its token is
# still there and the count is within the new holder's cap — what `_ACQUIRE` would have
# admitted had it been released and taken again —, else given back (0: take one anew).
_HANDOVER = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
if redis.call('ZCARD', KEYS[1]) <= tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[3]), ARGV[1])
  local keep = math.ceil(tonumber(ARGV[3]) * 1000) + 60000
  if redis.call('PTTL', KEYS[1]) < keep then redis.call('PEXPIRE', KEYS[1], keep) end
  return 1
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[2], '1')
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[2]), -1)
redis.call('PEXPIRE', KEYS[2], 5000)
return 0
"""

_COUNT = """
local t = redis.call('TIME')
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(t[1]) + tonumber(t[2]) / 1000000)
return redis.call('ZCARD', KEYS[1])
"""


# Waits between tries while Redis does not answer: doubling from the first to the last.
BACKOFF_FIRST_S, BACKOFF_MAX_S = 0.2, 5.0
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


class LuaScript:
    """A Lua script run with EVALSHA, loaded again when the server does not know it (a restart,
    another server): what redis-py's `Script` does, without its `evalsha`'s deprecation wrapper,
    which builds a dict of every call's arguments (a tenth of a slot thread's limiter CPU)."""

    def __init__(self, client: redis.Redis, script: str):
        self.client, self.script = client, script
        self.sha = client.register_script(script).sha  # redis-py's digest of the client's encoding

    def __call__(self, keys=(), args=()):
        try:
            return self.client.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            self.sha = self.client.script_load(self.script)
            return self.client.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)


@dataclass(frozen=True)
class Place:
    """One in-flight place taken under `name`, until `expires` (time.monotonic) at the latest.
    Redis counts its token until `counted_until` at least (never before `expires`)."""

    name: str
    token: str
    cap: int
    expires: float
    counted_until: float = 0.0


def backoff_delays(first: float = BACKOFF_FIRST_S, most: float = BACKOFF_MAX_S):
    """0.2, 0.4, 0.8, … seconds, never more than `most`: the waits between tries."""
    delay = first
    while True:
        yield delay
        delay = min(delay * 2, most)


def wait_for_redis(connection, *, what: str, error: Exception, sleep=time.sleep) -> None:
    """Block until Redis answers a PING, trying with growing pauses (0.2 s … 5 s)."""
    logger.error("Redis went away during %s (%s); waiting for it to come back", what, error)
    for delay in backoff_delays():
        sleep(delay)
        try:
            connection.ping()
        except REDIS_DOWN:
            continue
        logger.warning("Redis answers again after an outage during %s; carrying on", what)
        return


class Holding:
    """`hold`, the block form of a limiter's `acquire` and `release`, for every limiter below."""

    @contextmanager
    def hold(self, name: str, cap: int, *, lease_s: float):
        """Wait for one of `cap` places under `name`; hold it for the block (at most lease_s)."""
        place = self.acquire(name, cap, lease_s=lease_s)
        try:
            yield place
        finally:
            self.release(place)


class InflightLimiter(Holding):
    def __init__(self, client: redis.Redis, *, sleep=time.sleep):
        self.client = client
        self.sleep = sleep
        self._acquire = LuaScript(client, _ACQUIRE)
        self._release = LuaScript(client, _RELEASE)
        self._count = LuaScript(client, _COUNT)

    def acquire(self, name: str, cap: int, *, lease_s: float, hold_s: float = 0.0, ticket=None) -> Place:
        """Wait for one of `cap` places under `name`, however long Redis is away. Redis counts
        it for `lease_s` + `hold_s` (`HandoverLimiter`: time to hand it on without Redis).
        `ticket` is for `HandoverLimiter`; here nobody hands a place on."""
        key = KEY_PREFIX + name
        wake = key + WAKE_SUFFIX
        token = uuid.uuid4().hex
        delays = None
        while True:
            try:
                asked = time.monotonic()  # Redis's expiry is later than this + its lease
                if self._acquire(keys=[key], args=[cap, lease_s + hold_s, token]):
                    return Place(name, token, max(int(cap), 1), time.monotonic() + lease_s,
                                 counted_until=asked + lease_s + hold_s)
                self.client.blpop([wake], timeout=WAKE_TIMEOUT_S)
                delays = None
            except REDIS_DOWN as exc:
                delays = delays or backoff_delays()
                delay = next(delays)
                logger.warning("in-flight limiter: Redis does not answer (%s); trying again in %.1f s", exc, delay)
                self.sleep(delay)

    def release(self, place: Place) -> None:
        """Give the place back; never raises (a failure is retried in the background)."""
        if not self._try_release(place):
            threading.Thread(target=self._release_later, args=(place,), daemon=True,
                             name=f"limiter-release-{place.token[:8]}").start()

    def _try_release(self, place: Place) -> bool:
        key = KEY_PREFIX + place.name
        try:
            self._release(keys=[key, key + WAKE_SUFFIX], args=[place.token, place.cap])
            return True
        except REDIS_DOWN as exc:
            logger.warning("in-flight limiter: could not give back a place under %s (%s); retrying "
                           "in the background", place.name, exc)
            return False

    def _release_later(self, place: Place) -> None:
        for delay in backoff_delays():
            if time.monotonic() > max(place.expires, place.counted_until):
                return  # Redis drops the token by itself now
            time.sleep(delay)
            if self._try_release(place):
                logger.info("in-flight limiter: place under %s given back after Redis returned", place.name)
                return

    def in_flight(self, name: str) -> int:
        return int(self._count(keys=[KEY_PREFIX + name]))


# How much longer than its holder's lease Redis counts a place a `HandoverLimiter` took or renewed:
# hand-overs within this margin need no Redis at all; a holder that died keeps its place counted
# for at most this much longer. A call takes L (0.2-1 s in the benchmark), so a place is renewed
# in Redis once every few seconds instead of at every hand-over.
HOLD_S = 5.0


class _Waiter:
    """A thread of this process waiting for a place: handed one (`place`; `taken` when the
    giver took it over for it), or told to take its turn asking Redis (`place` None)."""

    __slots__ = ("event", "place", "taken", "cap", "lease_s", "ticket")

    def __init__(self, cap: int, lease_s: float, ticket):
        self.event = threading.Event()
        self.place: Place | None = None
        self.taken = False
        self.cap, self.lease_s, self.ticket = max(int(cap), 1), lease_s, ticket


class Handing:
    """A place given to a waiting thread of this process (`HandoverLimiter.hand_on`). With a
    `ticket` (the waiter's, opaque here) the waiter is woken only by `complete`, after the giver
    did what the ticket asks (the journal: reserve the waiter's attempt with its own receipt)."""

    def __init__(self, waiter: _Waiter | None = None, place: Place | None = None):
        self._waiter, self._place = waiter, place
        self.ticket = waiter.ticket if waiter is not None else None

    def complete(self) -> None:
        if self._waiter is not None:
            self._waiter.place, self._waiter.taken = self._place, True
            self._waiter.event.set()
            self._waiter = None


class HandoverLimiter(Holding):
    """`InflightLimiter` for the many slot threads of one process (`workers.MultiSlotWorker`).

    A place given back while another thread of the process waits for one under the same name
    goes to that thread directly, instead of a release, a wake-up of some waiter in some
    process and that waiter's own acquire. Redis counts a place this limiter took for its
    lease plus `HOLD_S`, so within that margin a hand-over to a holder with the same cap
    touches nothing but this process: Redis still counts the token for the whole of the new
    holder's lease, and the count is unchanged (one holder out, one in: the cap cannot be
    passed). Past the margin, or to a holder with another cap, one Redis script
    (`_HANDOVER`: the token still counted, the count within the new holder's cap, the token
    counted for lease + `HOLD_S` again) decides. Only one thread of the process per name waits
    on Redis at a time; the others wait here, in arrival order. The cap is Redis's as for
    `InflightLimiter`; a dead holder's place is dropped by Redis at most `HOLD_S` later.
    Should Redis lose its data (a restart without persistence), the places in flight go
    uncounted until given back, as with `InflightLimiter`; here hand-overs may keep one so for
    at most `HOLD_S` more.
    """

    def __init__(self, limiter: InflightLimiter):
        self.limiter = limiter
        self.client = limiter.client
        self._handover = LuaScript(limiter.client, _HANDOVER)
        self._lock = threading.Lock()
        self._waiting: dict[str, deque[_Waiter]] = {}
        self._asking: set[str] = set()  # names one of this process's threads is asking Redis for

    def acquire(self, name: str, cap: int, *, lease_s: float, ticket=None) -> Place:
        """A place under `name`. `ticket`: what a thread handing this one its place may do for
        it first, with its place already taken over (`hand_on`, `Handing.complete`)."""
        while True:
            waiter = None
            with self._lock:
                if name in self._asking:
                    waiter = _Waiter(cap, lease_s, ticket)
                    self._waiting.setdefault(name, deque()).append(waiter)
                else:
                    self._asking.add(name)
            if waiter is not None:
                waiter.event.wait()
                if waiter.taken:
                    return waiter.place
                if waiter.place is not None:
                    place = self._take_over(waiter.place, cap, lease_s)
                    if place is not None:
                        return place
                    continue  # the place was not this thread's to keep: queue again
            try:
                return self.limiter.acquire(name, cap, lease_s=lease_s, hold_s=HOLD_S)
            finally:
                self._pass_the_asking(name)

    def _pass_the_asking(self, name: str) -> None:
        with self._lock:
            queue = self._waiting.get(name)
            if queue:
                queue.popleft().event.set()  # its turn to ask Redis (its place stays None)
            else:
                self._asking.discard(name)

    def _take_over(self, place: Place, cap: int, lease_s: float) -> Place | None:
        started = time.monotonic()
        if max(int(cap), 1) == place.cap and started + lease_s <= place.counted_until:
            return replace(place, expires=started + lease_s)  # Redis counts it long enough already
        key = KEY_PREFIX + place.name
        try:
            kept = self._handover(keys=[key, key + WAKE_SUFFIX], args=[place.token, cap, lease_s + HOLD_S])
        except REDIS_DOWN:
            self.limiter.release(place)  # retried in the background until its lease runs out
            return None
        if not kept:
            return None
        return replace(place, cap=max(int(cap), 1), expires=started + lease_s,
                       counted_until=started + lease_s + HOLD_S)

    def release(self, place: Place) -> None:
        """Hand the place to a thread of this process waiting under its name, else give it back."""
        if not self.pass_on(place):
            self.limiter.release(place)

    def hand_on(self, place: Place) -> Handing | None:
        """Give the place to a thread of this process waiting under its name, if one waits (None:
        the place is still the caller's). Touches nothing but this process. When the first
        waiter brought a ticket and the place needs no Redis to be its (the same cap, counted
        long enough), the place is taken over for it now and the caller must `complete` the
        returned `Handing` once it did what the ticket asks; otherwise the waiter has it already."""
        with self._lock:
            queue = self._waiting.get(place.name)
            waiter = queue[0] if queue else None
            if waiter is None:
                return None
            now = time.monotonic()
            if (waiter.ticket is not None and waiter.cap == place.cap
                    and now + waiter.lease_s <= place.counted_until):
                queue.popleft()
                return Handing(waiter, replace(place, expires=now + waiter.lease_s))
        return Handing() if self.pass_on(place) else None

    def pass_on(self, place: Place) -> bool:
        """Hand the place to a thread of this process waiting under its name, if one waits;
        False (the place still the caller's) otherwise. Touches nothing but this process."""
        with self._lock:
            queue = self._waiting.get(place.name)
            if not queue:
                return False
            waiter = queue.popleft()
            waiter.place = place
            waiter.event.set()
            return True

    def in_flight(self, name: str) -> int:
        return self.limiter.in_flight(name)


class NoLimiter(Holding):
    """For inline runs (one process, one request at a time): nothing to share."""

    def acquire(self, name: str, cap: int, *, lease_s: float, ticket=None) -> None:
        return None

    def release(self, place) -> None:
        pass

    def in_flight(self, name: str) -> int:
        return 0
