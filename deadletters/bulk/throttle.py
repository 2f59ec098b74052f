"""Pacing a bulk action: at most `rate` letters a second, in batches of about a second's work."""

import math
import time
from collections.abc import Callable

from django.conf import settings

# A sleeping runner looks this often whether the operator changed the rate, paused or cancelled.
CHECK_EVERY_SECONDS = 0.5


class Throttle:
    """Keeps a run at `rate` items per second: the next batch may start at `next_due`, and each
    batch of n items moves it n/rate seconds on, so the run's rate is exact however long each
    batch's work took (as long as the work is faster than the rate). `clock` and `sleep` are
    injectable for tests."""

    def __init__(self, rate: float, *, clock: Callable[[], float] = time.monotonic, sleep=time.sleep):
        self.rate = rate
        self.clock = clock
        self.sleep = sleep
        self.next_due = clock()

    # Work that ran slow may be caught up with at most this much of a burst afterwards.
    max_burst_seconds = 1.0

    def delay_for(self, items: int) -> float:
        """Seconds to wait after `items` more items to stay on schedule."""
        if self.rate <= 0:
            return 0.0
        now = self.clock()
        self.next_due = max(self.next_due, now - self.max_burst_seconds)
        return max(0.0, self.next_due + items / self.rate - now)

    def wait(self, items: int, *, interrupted: Callable[[], bool] | None = None) -> float:
        """Sleep until `items` more items are paid for. With `interrupted`, sleep in pieces of at
        most CHECK_EVERY_SECONDS and return early when it says so (rate changed, paused...)."""
        delay = self.delay_for(items)
        if self.rate > 0:
            self.next_due += items / self.rate
        if delay <= 0:
            return 0.0
        if interrupted is None:
            self.sleep(delay)
            return delay
        end = self.clock() + delay
        # A microsecond short of the end is the end: a float clock may never quite reach it.
        while (left := end - self.clock()) > 1e-6:
            self.sleep(min(left, CHECK_EVERY_SECONDS))
            if interrupted():
                break
        return delay

    def change_rate(self, rate: float) -> None:
        """Carry on at `rate` from now: what is still owed for items already done at the old rate
        is converted to the new one, so a change takes effect at once and keeps the count exact."""
        if rate == self.rate:
            return
        now = self.clock()
        owed_items = max(0.0, self.next_due - now) * self.rate if self.rate > 0 else 0.0
        self.rate = rate
        self.next_due = now + (owed_items / rate if rate > 0 else 0.0)


def batch_size_for(rate: float) -> int:
    """Batches of at most about one second of work, so pause and cancel take effect quickly."""
    per_second = max(1, math.floor(rate)) if rate > 0 else settings.BULK_ACTION_BATCH_SIZE
    return max(1, min(settings.BULK_ACTION_BATCH_SIZE, per_second))
