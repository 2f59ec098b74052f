"""Per-robot state shared by every sender process through Redis.

- a sliding-window limiter (a sorted set of send times, trimmed and checked atomically in Lua),
  so all senders together stay under DINGTALK_RATE_PER_MINUTE;
- a throttle pause after DingTalk answers 130101 (it mutes the robot for 10 minutes);
- a configuration-error pause after 310000 (signature, keyword, timestamp), keyed by a hash of the
  webhook, secret and keyword, so fixing the configuration ends it at once;
- a short "robot down" mark after a transport failure, so new alerts wait and are coalesced
  instead of each becoming a message of its own that fails.

Keys carry a hash of the webhook (`robot_key`), never the token. Times come from an injectable
clock (seconds since the epoch) so tests can move through minutes without waiting for them.
"""

import json
import time
import uuid
from collections.abc import Callable

from redis import Redis

from deadletters.alerts.client import RobotConfig

WINDOW_SECONDS = 60.0

_ACQUIRE = """
local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local used = redis.call('ZCARD', key)
if used < limit then
  redis.call('ZADD', key, now, ARGV[4])
  redis.call('EXPIRE', key, math.ceil(window) + 3600)
  return {1, tostring(used + 1)}
end
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
return {0, tostring(oldest[2])}
"""

_USED = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
return redis.call('ZCARD', KEYS[1])
"""


class RobotState:
    def __init__(self, conn: Redis, robot: RobotConfig, *, clock: Callable[[], float] = time.time):
        self.conn = conn
        self.robot = robot
        self.clock = clock
        self.limit = robot.rate_per_minute
        prefix = f"alerts:dingtalk:{robot.robot_key}"
        self.rate_key = f"{prefix}:sent"
        self.throttle_key = f"{prefix}:throttled"
        self.down_key = f"{prefix}:down"
        self.config_key = f"alerts:dingtalk:config:{robot.config_key}:error"
        self._acquire = conn.register_script(_ACQUIRE)
        self._used = conn.register_script(_USED)

    # --- rate limit ---------------------------------------------------------------

    def acquire(self) -> str | None:
        """Take one send slot in the current minute; None when the budget is spent."""
        token = uuid.uuid4().hex
        allowed, _ = self._acquire(
            keys=[self.rate_key], args=[repr(self.clock()), WINDOW_SECONDS, self.limit, token]
        )
        return token if int(allowed) else None

    def release(self, token: str) -> None:
        """Give back a slot that was taken but not used for a request."""
        self.conn.zrem(self.rate_key, token)

    def used(self) -> int:
        return int(self._used(keys=[self.rate_key], args=[repr(self.clock()), WINDOW_SECONDS]))

    def remaining(self) -> int:
        return max(self.limit - self.used(), 0)

    def seconds_until_slot(self) -> float:
        if self.remaining() > 0:
            return 0.0
        oldest = self.conn.zrange(self.rate_key, 0, 0, withscores=True)
        if not oldest:
            return 0.0
        return max(oldest[0][1] + WINDOW_SECONDS - self.clock(), 0.0)

    def seconds_since_last_send(self) -> float | None:
        newest = self.conn.zrange(self.rate_key, -1, -1, withscores=True)
        if not newest:
            return None
        return self.clock() - newest[0][1]

    # --- pauses -------------------------------------------------------------------

    def _until(self, key: str) -> float | None:
        raw = self.conn.get(key)
        if raw is None:
            return None
        try:
            until = float(json.loads(raw)["until"])
        except (ValueError, KeyError, TypeError):
            return None
        return until if until > self.clock() else None

    def _set_until(self, key: str, seconds: float, **extra) -> float:
        until = self.clock() + seconds
        value = json.dumps({"until": until, "at": self.clock(), **extra})
        # Redis' own expiry is a backstop in real seconds; the pause itself compares `until`.
        self.conn.set(key, value, ex=int(seconds) + 24 * 3600)
        return until

    def throttle(self, seconds: float) -> float:
        return self._set_until(self.throttle_key, seconds)

    def throttled_until(self) -> float | None:
        return self._until(self.throttle_key)

    def mark_down(self, seconds: float) -> float:
        return self._set_until(self.down_key, seconds)

    def down_until(self) -> float | None:
        return self._until(self.down_key)

    def clear_down(self) -> None:
        self.conn.delete(self.down_key)

    def set_config_error(self, *, errcode: int | None, error: str, seconds: float) -> float:
        return self._set_until(self.config_key, seconds, errcode=errcode, error=error)

    def config_error(self) -> dict | None:
        """The recorded configuration error (even after its pause ended), or None."""
        raw = self.conn.get(self.config_key)
        if raw is None:
            return None
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        data["active"] = float(data.get("until", 0)) > self.clock()
        return data

    def clear_config_error(self) -> None:
        self.conn.delete(self.config_key)

    def paused_reason(self) -> str:
        """Why nothing may be sent right now, or ''."""
        now = self.clock()
        until = self.throttled_until()
        if until:
            return f"robot throttled by DingTalk (errcode 130101) for {until - now:.0f}s more"
        error = self.config_error()
        if error and error["active"]:
            return (
                f"DingTalk rejected the configuration ({error.get('error', '')}); "
                f"paused {float(error['until']) - now:.0f}s more, or until the settings change"
            )
        return ""
