"""Per-kind concurrency cap: a Redis semaphore with leases, plus a waiting room.

Holders: a sorted set per kind, member `task:attempt`, score = lease expiry (Redis server time,
so workers' clocks do not matter). A worker killed with SIGKILL never releases its slot; the
slot frees itself when the lease (job timeout + grace, as the task's own lease) runs out.

Waiters: a sorted set per kind of attempts that found no slot, ordered by priority then time.
A deferred attempt costs nothing (no attempt number used, no worker kept busy); whoever frees a
slot wakes as many waiters as there are free slots, and `wake_all()` (from the reaper loop) does
the same for slots freed by an expired lease.

Overrides: a cap set for a while over the configured one (a circuit breaker's canary,
reports/services/breakers.py), in a Redis hash that each process reads at most every OVERRIDES_TTL.
"""

import logging
import math
import time

from django.conf import settings
from redis.exceptions import RedisError

from reports.kinds import KINDS
from reports.services.enqueue import enqueue_attempts_many
from transport.connection import redis_connection

logger = logging.getLogger(__name__)

PRIORITY_RANK = {"high": 0, "default": 1, "low": 2}

# KEYS[1] holders; ARGV: member, limit, lease seconds, the task's member prefix. 1 = slot held (new
# or renewed), 0 = full. A claim of attempt n means attempt n-1 has ended (the claim's UPDATE
# matched only then), so a slot the task's earlier attempt still holds is stale and goes first.
_ACQUIRE = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t)
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if member ~= ARGV[1] and string.sub(member, 1, #ARGV[4]) == ARGV[4] then
    redis.call('ZREM', KEYS[1], member)
  end
end
if redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], t + tonumber(ARGV[3]), ARGV[1])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])) + 60)
  return 1
end
return 0
"""

# A Lua function the scripts below (and the pool worker's dequeue, reports/worker/pool_rq.py) embed:
# release `member` from a kind's holders when given, then pop as many waiters as it has free slots.
RELEASE_AND_WAKE_FUNCTION = """
local function release_and_wake(holders, waiters, limit, member)
  if member then redis.call('ZREM', holders, member) end
  local now = redis.call('TIME')
  local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', t)
  local free = tonumber(limit) - redis.call('ZCARD', holders)
  if free <= 0 then return {} end
  local popped = redis.call('ZPOPMIN', waiters, free)
  local members = {}
  for i = 1, #popped, 2 do members[#members + 1] = popped[i] end
  return members
end
"""
# KEYS[1] holders, KEYS[2] waiters; ARGV: limit and, to release first, a holder.
_WAKE = RELEASE_AND_WAKE_FUNCTION + "return release_and_wake(KEYS[1], KEYS[2], ARGV[1], ARGV[2])"

# A Lua function for the pool worker's dequeue: a slot taken for an attempt before its claim, from
# the kind its job names. Only a free slot for a member nobody holds: the stale slots of the task's
# earlier attempts are left alone until the claim proves them stale (evict_earlier_in), and a held
# member is the business of the ordinary claim. Returns the holder's score (to release it only if
# nobody renewed it meanwhile) or false when no slot was taken.
TAKE_SLOT_FUNCTION = """
local function take_slot(holders, limit, member, lease)
  local now = redis.call('TIME')
  local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', t)
  if redis.call('ZSCORE', holders, member) or redis.call('ZCARD', holders) >= limit then return false end
  redis.call('ZADD', holders, t + lease, member)
  redis.call('EXPIRE', holders, math.ceil(lease) + 60)
  return redis.call('ZSCORE', holders, member)
end
"""

# KEYS[1] holders, KEYS[2] waiters; ARGV: limit, holder, the score it was taken with.
_GIVE_BACK = RELEASE_AND_WAKE_FUNCTION + """
local member = nil
if redis.call('ZSCORE', KEYS[1], ARGV[2]) == ARGV[3] then member = ARGV[2] end
return release_and_wake(KEYS[1], KEYS[2], ARGV[1], member)
"""

# KEYS[1] holders; ARGV: the holder, the task's member prefix.
_EVICT_EARLIER = """
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if member ~= ARGV[1] and string.sub(member, 1, #ARGV[2]) == ARGV[2] then
    redis.call('ZREM', KEYS[1], member)
  end
end
return 0
"""


OVERRIDES_KEY = "reports:cap:overrides"
OVERRIDES_TTL = 1.0
_overrides: tuple[float, dict[str, int]] = (-math.inf, {})


def overrides() -> dict[str, int]:
    """{kind: cap} of the overrides, as this process read them at most OVERRIDES_TTL ago."""
    global _overrides
    read_at, caps = _overrides
    if time.monotonic() - read_at >= OVERRIDES_TTL:
        try:
            read = redis_connection().hgetall(OVERRIDES_KEY)
            caps = {kind.decode(): int(cap) for kind, cap in read.items()}
        except RedisError as exc:  # what was read last holds; asked again after the TTL
            logger.error("could not read the concurrency overrides: %s", exc)
        _overrides = (time.monotonic(), caps)
    return caps


def configured_limit(kind: str) -> int | None:
    """The kind's REPORT_KIND_CONCURRENCY entry, else the default (None: uncapped)."""
    return settings.REPORT_KIND_CONCURRENCY.get(kind, settings.REPORT_KIND_DEFAULT_CONCURRENCY or None)


def limit_for(kind: str) -> int | None:
    """The kind's cap: the configured one, lowered by an override."""
    limit, override = configured_limit(kind), overrides().get(kind)
    return limit if override is None else min(override, limit or override)


def any_capped() -> bool:
    return bool(settings.REPORT_KIND_CONCURRENCY or settings.REPORT_KIND_DEFAULT_CONCURRENCY or overrides())


def capped_kinds() -> set[str]:
    names = set(settings.REPORT_KIND_CONCURRENCY) | set(overrides())
    if settings.REPORT_KIND_DEFAULT_CONCURRENCY:
        names |= set(KINDS)
    return names


def override(kind: str, cap: int | None) -> None:
    """Set a kind's override, or lift it (None): then the waiters it held wake, as many as the
    configured cap frees, or all of them for an uncapped kind (whose holders are not kept)."""
    global _overrides
    conn = redis_connection()
    if cap is not None:
        if configured_limit(kind) is None:
            conn.delete(holders_key(kind))  # stale members of slots nobody released while uncapped
        conn.hset(OVERRIDES_KEY, kind, cap)
    else:
        conn.hdel(OVERRIDES_KEY, kind)
    _overrides = (-math.inf, {})
    if cap is None and configured_limit(kind) is None:
        enqueue_woken(kind, [member for member, _score in conn.zpopmin(waiters_key(kind), 10**6)])
    elif cap is None:
        wake(kind)


def holders_key(kind: str) -> str:
    return f"reports:cap:{kind}:holders"


def waiters_key(kind: str) -> str:
    return f"reports:cap:{kind}:waiting"


def holder(task_id: int, attempt: int) -> str:
    return f"{task_id}:{attempt}"


def _waiter(task_id: int, attempt: int, priority: str, timeout: int) -> str:
    return f"{task_id}:{attempt}:{priority}:{timeout}"


def acquire(*, kind: str, task_id: int, attempt: int, lease_seconds: float) -> bool:
    """Take (or renew) a slot for this attempt; True also when the kind has no cap."""
    limit = limit_for(kind)
    if limit is None:
        return True
    conn = redis_connection()
    member = holder(task_id, attempt)
    return bool(conn.eval(_ACQUIRE, 1, holders_key(kind), member, limit, lease_seconds, f"{task_id}:"))


def caps_by_holders_key() -> dict[str, list]:
    """{kind: [holders key, limit]} of every capped kind, for a script that takes slots."""
    return {kind: [holders_key(kind), limit_for(kind)] for kind in sorted(capped_kinds()) if limit_for(kind)}


def give_back(*, kind: str, task_id: int, attempt: int, score: bytes) -> None:
    """Release a slot taken before a claim that did not happen (TAKE_SLOT_FUNCTION), unless an
    ordinary claim of the same attempt renewed it meanwhile, and wake its waiters."""
    conn = redis_connection()
    member = holder(task_id, attempt)
    keys = (holders_key(kind), waiters_key(kind))
    woken = conn.eval(_GIVE_BACK, 2, *keys, limit_for(kind) or 0, member, score)
    enqueue_woken(kind, woken)


def evict_earlier(*, kind: str, task_id: int, attempt: int) -> None:
    """As an ordinary claim does in its acquire: attempt n is claimed, so its task's earlier
    attempts have ended and their slots (a killed worker's) are stale."""
    redis_connection().eval(_EVICT_EARLIER, 1, holders_key(kind), holder(task_id, attempt), f"{task_id}:")


def release(*, kind: str, task_id: int, attempt: int) -> None:
    if limit_for(kind) is None:
        return
    redis_connection().zrem(holders_key(kind), holder(task_id, attempt))


def park(*, kind: str, task_id: int, attempt: int, priority: str, timeout: int) -> None:
    """Join the waiting room: high priority first, then first come first served."""
    score = PRIORITY_RANK.get(priority, 1) * 10**11 + time.time()
    redis_connection().zadd(waiters_key(kind), {_waiter(task_id, attempt, priority, timeout): score})


def unpark(*, kind: str, task_id: int, attempt: int, priority: str, timeout: int) -> None:
    redis_connection().zrem(waiters_key(kind), _waiter(task_id, attempt, priority, timeout))


def parked_ids(kind: str, members: list[tuple[int, int, str, int]]) -> set[int]:
    """Which of these (task_id, attempt, priority, timeout) attempts wait in the room."""
    if not members or limit_for(kind) is None:
        return set()
    with redis_connection().pipeline(transaction=False) as pipe:
        for member in members:
            pipe.zscore(waiters_key(kind), _waiter(*member))
        scores = pipe.execute()
    return {member[0] for member, score in zip(members, scores, strict=True) if score is not None}


def wake(kind: str, *, releasing: str | None = None) -> int:
    """Enqueue as many waiting attempts as the kind has free slots (after releasing the holder
    `releasing`, when given); returns how many."""
    limit = limit_for(kind)
    if limit is None:
        return 0
    conn = redis_connection()
    if releasing is None:
        members = conn.eval(_WAKE, 2, holders_key(kind), waiters_key(kind), limit)
    else:
        members = conn.eval(_WAKE, 2, holders_key(kind), waiters_key(kind), limit, releasing)
    return enqueue_woken(kind, members)


def enqueue_woken(kind: str, members: list[bytes]) -> int:
    items = []
    for raw in members:
        task_id, attempt, priority, timeout = raw.decode().split(":")
        items.append((int(task_id), int(attempt), priority, int(timeout), kind))
    if items:
        # A woken attempt that lost the race for the slot parks again; one that was claimed
        # meanwhile is a phantom delivery: both are harmless.
        enqueue_attempts_many(items)
        logger.info("woke %s attempt(s) of %s waiting for a concurrency slot", len(items), kind)
    return len(items)


def release_and_wake(*, kind: str, task_id: int, attempt: int) -> None:
    if limit_for(kind) is None:
        return
    wake(kind, releasing=holder(task_id, attempt))


def wake_all() -> int:
    """For the reaper loop: slots freed by expired leases (killed workers) wake their waiters."""
    return sum(wake(kind) for kind in capped_kinds())


def holders(kind: str) -> dict[str, float]:
    """Live and not-yet-pruned holders with their lease expiry (epoch seconds), for tests and the console."""
    return {
        member.decode(): score
        for member, score in redis_connection().zrange(holders_key(kind), 0, -1, withscores=True)
    }
