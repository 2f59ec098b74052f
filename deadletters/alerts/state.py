"""Per-channel state shared by every sender process through Redis: sliding-window budgets (per
minute and, where the service documents one, per second; DingTalk's 20 a minute per robot), and
one pause with its reason: `throttled` (the service said "too fast", for as long as it asked),
`config` (it refused our configuration; a changed URL, secret or keyword ends it, since the key
hashes them) or `down` (no answer: probed again after a short wait, and the first answer ends it).

Keys carry the channel's name and a hash, never a URL. Times come from an injectable clock
(seconds since the epoch) so tests can move through minutes without waiting for them."""

import json
import time
import uuid
from collections.abc import Callable

from redis import Redis

from deadletters.alerts.channels import Channel

WINDOW_SECONDS = 60.0
THROTTLED, CONFIG, DOWN = "throttled", "config", "down"

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
        self.windows = [(f"{prefix}:minute", WINDOW_SECONDS, channel.rate_per_minute)]
        if channel.rate_per_second:
            self.windows.append((f"{prefix}:second", 1.0, channel.rate_per_second))
        self.pause_key = f"{prefix}:paused"
        self._acquire = conn.register_script(_ACQUIRE)

    # --- budget ---------------------------------------------------------------------

    def acquire(self) -> str | None:
        """Take one send slot; None when a budget is spent."""
        token = uuid.uuid4().hex
        args: list = [repr(self.clock())]
        for _, window, limit in self.windows:
            args += [window, limit]
        allowed = self._acquire(keys=[k for k, _, _ in self.windows], args=[*args, token])
        return token if int(allowed) else None

    def release(self, token: str) -> None:
        """Give back a slot that was taken but not used for a request."""
        for key, _, _ in self.windows:
            self.conn.zrem(key, token)

    def used(self) -> int:
        key, window, _ = self.windows[0]
        self.conn.zremrangebyscore(key, "-inf", self.clock() - window)
        return int(self.conn.zcard(key))

    def remaining(self) -> int:
        return max(self.channel.rate_per_minute - self.used(), 0)

    def seconds_since_last_send(self) -> float | None:
        newest = self.conn.zrange(self.windows[0][0], -1, -1, withscores=True)
        return self.clock() - newest[0][1] if newest else None

    def seconds_until_slot(self) -> float:
        if self.remaining() > 0:
            return 0.0
        oldest = self.conn.zrange(self.windows[0][0], 0, 0, withscores=True)
        return max(oldest[0][1] + WINDOW_SECONDS - self.clock(), 0.0) if oldest else 0.0

    # --- the pause ------------------------------------------------------------------

    def pause(self, kind: str, seconds: float, reason: str, *, failures: int = 0) -> float:
        until = self.clock() + seconds
        value = json.dumps({"kind": kind, "until": until, "reason": reason, "failures": failures})
        # Redis' own expiry is a backstop in real seconds; the pause itself compares `until`.
        self.conn.set(self.pause_key, value, ex=int(seconds) + 24 * 3600)
        return until

    def recorded(self) -> dict | None:
        """The last pause (even once its time is over: a down channel is probed, not trusted)."""
        raw = self.conn.get(self.pause_key)
        try:
            data = json.loads(raw) if raw is not None else None
            return data if data and float(data["until"]) >= 0 else None
        except (ValueError, KeyError, TypeError):
            return None

    def paused(self) -> dict | None:
        """The pause in force now ({kind, until, reason, failures}), or None."""
        data = self.recorded()
        return data if data and float(data["until"]) > self.clock() else None

    def clear_pause(self) -> None:
        self.conn.delete(self.pause_key)
