"""The one backoff rule of the project: how long to wait before try number `attempt`.

Every wait between tries uses it: a task's retries (REPORT_RETRY_BACKOFF with jitter), alert
resends, reconnects to Redis or the database, a supervisor restarting a child. A ladder of steps
is given as-is (the last step repeats); `doubling(first, cap)` makes the usual exponential ladder.
"""

import random
from collections.abc import Sequence


def doubling(first: float, cap: float) -> tuple[float, ...]:
    """first, 2*first, 4*first, ... up to and ending at cap."""
    steps = [first]
    while steps[-1] * 2 < cap:
        steps.append(steps[-1] * 2)
    return (*steps, cap) if steps[-1] < cap else tuple(steps)


def backoff_delay(attempt: int, steps: Sequence[float], *, jitter: float = 0.0) -> float:
    """Seconds to wait before try `attempt + 1` (attempt 1 is the first failed try): the step of
    that try (the last step repeating), plus up to `jitter` times it so a burst spreads out."""
    base = steps[min(max(attempt, 1) - 1, len(steps) - 1)]
    return base * (1 + random.uniform(0, jitter)) if jitter else base
