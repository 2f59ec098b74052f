"""Per-channel state shared by every sender process through Redis: sliding-window budgets (per
minute and, where the service documents one, per second), a pause after the service said "too
fast" (for as long as it asked), and a short "down" mark after a transport failure or a rejected
configuration, so new alerts wait and coalesce instead of failing one by one."""

import json
import time
import uuid
from collections.abc import Callable

from redis import Redis

from deadletters.alerts.channels.config import Channel

_ACQUIRE = """
local now = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  local window = tonumber(ARGV[1 + i * 2 - 1])
  local limit = tonumber(ARGV[1 + i * 2])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  if redis.call('ZCARD', key) >= limit then
    return 0
  end
end
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[#ARGV])
  redis.call('EXPIRE', key, 3700)
end
return 1
"""


class ChannelState:
    def __init__(self, conn: Redis, channel: Channel, *, clock: Callable[[], float] = time.time):
        self.conn = conn
        self.channel = channel
        self.clock = clock
        prefix = f"alerts:channel:{channel.key}"
        self.windows = [(f"{prefix}:minute", 60.0, channel.rate_per_minute)]
        if channel.rate_per_second:
            self.windows.append((f"{prefix}:second", 1.0, channel.rate_per_second))
        self.pause_key = f"{prefix}:paused"
        self._acquire = conn.register_script(_ACQUIRE)

    def acquire(self) -> str | None:
        token = uuid.uuid4().hex
        args: list = [repr(self.clock())]
        for _, window, limit in self.windows:
            args += [window, limit]
        allowed = self._acquire(keys=[k for k, _, _ in self.windows], args=[*args, token])
        return token if int(allowed) else None

    def release(self, token: str) -> None:
        for key, _, _ in self.windows:
            self.conn.zrem(key, token)

    def used(self, window_index: int = 0) -> int:
        key, window, _ = self.windows[window_index]
        self.conn.zremrangebyscore(key, "-inf", self.clock() - window)
        return int(self.conn.zcard(key))

    def remaining(self) -> int:
        return max(self.channel.rate_per_minute - self.used(), 0)

    def seconds_since_last_send(self) -> float | None:
        newest = self.conn.zrange(self.windows[0][0], -1, -1, withscores=True)
        return self.clock() - newest[0][1] if newest else None

    def pause(self, seconds: float, reason: str) -> float:
        until = self.clock() + seconds
        value = json.dumps({"until": until, "reason": reason})
        self.conn.set(self.pause_key, value, ex=int(seconds) + 24 * 3600)
        return until

    def paused(self) -> tuple[float, str] | None:
        raw = self.conn.get(self.pause_key)
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            until = float(data["until"])
        except (ValueError, KeyError, TypeError):
            return None
        return (until, str(data.get("reason", ""))) if until > self.clock() else None

    def clear_pause(self) -> None:
        self.conn.delete(self.pause_key)
