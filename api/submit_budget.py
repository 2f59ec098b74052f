"""Each API token's submit budget: API_SUBMIT_RATE tasks per period, a batch of N costing N.

One GCRA (a token bucket kept as one number per token in Redis: the "theoretical arrival time" up
to which the budget is spent), charged and checked in one Lua script with Redis' own clock, so every
web process on every machine shares one budget and no two requests race. A client may spend a
whole period's budget at once; a request is let in while any budget is left, even when its N
items go past it (a batch larger than the budget must be possible), and the client then waits
until the debt is paid back. A refused request answers 429 with Retry-After.

Only what a request creates is charged: a rejected submit or an idempotent repeat is refunded.
When Redis cannot be reached the budget is not enforced (logged): submits keep working while the
reaper enqueues their tasks later, as they do without a rate limit.
"""

import logging
import math
from contextlib import contextmanager

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


def _key(token: ApiToken) -> str:
    return f"api:submit-budget:{token.pk}"


def _rate() -> tuple[float, int] | None:
    """(microseconds per task, period in microseconds), or None when the budget is off."""
    if not settings.API_SUBMIT_RATE:
        return None
    count, seconds = settings.API_SUBMIT_RATE
    period = seconds * 1_000_000
    return period / count, period


class Charge:
    def __init__(self, token: ApiToken, cost: int):
        self.token = token
        self.cost = cost
        self.refunded = False

    def refund(self) -> None:
        """Give the budget back: the request created nothing (refused, or an idempotent repeat)."""
        rate = _rate()
        if self.refunded or rate is None or self.cost == 0:
            return
        self.refunded = True
        try:
            conn = redis_connection()
            conn.register_script(_REFUND)(keys=[_key(self.token)], args=[self.cost, rate[0]])
        except RedisError as exc:
            logger.warning("submit budget of token %s not refunded: %s", self.token.name, exc)


def charge_submit_budget(token: ApiToken | None, *, cost: int) -> Charge | None:
    """Spend `cost` tasks of the token's budget, or raise ApiError 429 with Retry-After.

    Sessions (token None) have no budget: they are staff."""
    rate = _rate()
    if token is None or rate is None:
        return None
    per_task, period = rate
    try:
        wait = int(redis_connection().register_script(_CHARGE)(keys=[_key(token)], args=[cost, per_task, period]))
    except RedisError as exc:
        logger.warning("submit budget of token %s not enforced, Redis unavailable: %s", token.name, exc)
        return None
    if wait > 0:
        retry_after = max(1, math.ceil(wait / 1_000_000))
        count, seconds = settings.API_SUBMIT_RATE
        raise ApiError(
            429,
            f"this API token's submit budget ({count} tasks per {seconds} s) is spent; retry in {retry_after} s",
            headers={"Retry-After": str(retry_after)},
        )
    return Charge(token, cost)


@contextmanager
def submit_budget(token: ApiToken | None, *, cost: int):
    """Charge for the block's submit; refunded when the block raises (nothing was created)."""
    charge = charge_submit_budget(token, cost=cost)
    try:
        yield charge
    except BaseException:
        if charge is not None:
            charge.refund()
        raise
