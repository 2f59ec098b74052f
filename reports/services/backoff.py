"""The backoff policy: how long a failed attempt waits before the next one."""

import random

from django.conf import settings


def retry_delay(attempt: int) -> float:
    """Seconds before the attempt after `attempt` (counted within its run: 1 is the first attempt
    after a submit or a replay): the configured step (REPORT_RETRY_BACKOFF, the last one
    repeating), plus up to REPORT_RETRY_JITTER of it so a burst of failures spreads out."""
    steps = settings.REPORT_RETRY_BACKOFF
    base = steps[min(max(attempt, 1) - 1, len(steps) - 1)]
    return base * (1 + random.uniform(0, settings.REPORT_RETRY_JITTER))
