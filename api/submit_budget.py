"""Each API client's budgets: API_SUBMIT_RATE tasks per period (a batch of N costing N), and
API_REPLAY_RATE replays per period. A client is an API token, or a console user calling the API with
their session: sessions spend budgets too.

One GCRA (a token bucket kept as one number per client in Redis: the "theoretical arrival time" up
to which the budget is spent), charged and checked in one Lua script with Redis' own clock, so every
web process on every machine shares one budget and no two requests race. A client may spend a
whole period's budget at once; a request is let in while any budget is left, even when its N
items go past it (a batch larger than the budget must be possible), and the client then waits
until the debt is paid back. A refused request answers 429 with Retry-After.

Only what a request does is charged: a rejected submit, an idempotent repeat or a replay refused
is refunded. When Redis cannot be reached the budget is not enforced (logged): submits keep working
while the reaper enqueues their tasks later, as they do without a rate limit.
"""

import logging
import math
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from redis import RedisError

from api.errors import ApiError
from reports.models import ApiToken
from transport.connection import redis_connection

logger = logging.getLogger(__name__)

# KEYS[1]: the token's arrival time (microseconds); ARGV: cost, microseconds per task, period.
# Answers 0 when charged, else the microseconds until one task of budget is free again.
_CHARGE = """
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local per_task, period = tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or 0), now)
local wait = tat - now - (period - per_task)
if wait > 0 then
  return math.ceil(wait)
end
tat = tat + tonumber(ARGV[1]) * per_task
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
return 0
"""

_REFUND = """
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or 0) - tonumber(ARGV[1]) * tonumber(ARGV[2])
if tat <= now then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
end
return 0
"""


@dataclass(frozen=True)
class Budget:
    name: str  # in the Redis key and the 429's message
    setting: str  # (count, seconds) or None for "off"
    unit: str


SUBMIT = Budget("submit", "API_SUBMIT_RATE", "tasks")
REPLAY = Budget("replay", "API_REPLAY_RATE", "replays")


def _key(budget: Budget, holder) -> str:
    """A token's key as it always was; a session user's with a `user-` prefix."""
    who = holder.pk if isinstance(holder, ApiToken) else f"user-{holder.pk}"
    return f"api:{budget.name}-budget:{who}"


def _label(holder) -> str:
    return f"API token {holder.name}" if isinstance(holder, ApiToken) else f"user {holder.pk}"


def _rate(budget: Budget) -> tuple[float, int] | None:
    """(microseconds per unit, period in microseconds), or None when the budget is off."""
    setting = getattr(settings, budget.setting)
    if not setting:
        return None
    count, seconds = setting
    period = seconds * 1_000_000
    return period / count, period


class Charge:
    def __init__(self, budget: Budget, holder, cost: int):
        self.budget = budget
        self.holder = holder
        self.cost = cost
        self.refunded = False

    def refund(self) -> None:
        """Give the budget back: the request did nothing (refused, or an idempotent repeat)."""
        rate = _rate(self.budget)
        if self.refunded or rate is None or self.cost == 0:
            return
        self.refunded = True
        try:
            conn = redis_connection()
            conn.register_script(_REFUND)(keys=[_key(self.budget, self.holder)], args=[self.cost, rate[0]])
        except RedisError as exc:
            logger.warning("%s budget of %s not refunded: %s", self.budget.name, _label(self.holder), exc)


def charge_budget(budget: Budget, holder, *, cost: int) -> Charge | None:
    """Spend `cost` of the holder's (an ApiToken, or a session's user) budget, or raise ApiError
    429 with Retry-After."""
    rate = _rate(budget)
    if holder is None or rate is None:
        return None
    per_unit, period = rate
    try:
        wait = int(redis_connection().register_script(_CHARGE)(keys=[_key(budget, holder)],
                                                               args=[cost, per_unit, period]))
    except RedisError as exc:
        logger.warning("%s budget of %s not enforced, Redis unavailable: %s",
                       budget.name, _label(holder), exc)
        return None
    if wait > 0:
        retry_after = max(1, math.ceil(wait / 1_000_000))
        count, seconds = getattr(settings, budget.setting)
        whose = "this API token's" if isinstance(holder, ApiToken) else "this console user's"
        raise ApiError(
            429,
            f"{whose} {budget.name} budget ({count} {budget.unit} per {seconds} s) is spent; "
            f"retry in {retry_after} s",
            headers={"Retry-After": str(retry_after)},
        )
    return Charge(budget, holder, cost)


@contextmanager
def spending(budget: Budget, holder, *, cost: int = 1):
    """Charge for the block's work; refunded when the block raises (nothing was done)."""
    charge = charge_budget(budget, holder, cost=cost)
    try:
        yield charge
    except BaseException:
        if charge is not None:
            charge.refund()
        raise


def submit_budget(holder, *, cost: int):
    return spending(SUBMIT, holder, cost=cost)


def replay_budget(holder):
    return spending(REPLAY, holder, cost=1)
