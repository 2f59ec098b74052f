"""Every periodic duty of the house, each with its interval, each run from this one home: the
housekeeper process (`manage.py housekeeper`, the loop in reports/housekeeper/loop.py).

A duty must be safe to run twice at once, as several housekeepers may run (one per machine): it
is made of conditional UPDATEs that one caller wins, or takes a Redis lock of its own.

The pipeline's duties are listed here. The layers above add theirs at start-up with `register`
(deadletters/housekeeping.py, from DeadLettersConfig.ready): beside the signals of
reports/signals.py, the one way this layer calls up into them.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from reports.housekeeper import reaper
from reports.services import breakers, concurrency, promote_due_retries, take_back_lapsed
from reports.services.batches import aggregate_batches


@dataclass(frozen=True)
class Duty:
    name: str
    interval: float  # seconds from the end of one run to the start of the next
    run: Callable[[], object]


_registered: dict[str, Duty] = {}


def register(*duties: Duty) -> None:
    """Add duties of a layer above (a second registration of a name replaces the first)."""
    for duty in duties:
        _registered[duty.name] = duty


def every_duty() -> list[Duty]:
    recovery = settings.REAPER_INTERVAL
    return [
        # The due time of a retry lives on its row: promoted within a second of it.
        Duty("due retries", 0.5, promote_due_retries),
        # A worker killed whole is noticed within REPORT_LEASE_SECONDS + REAPER_INTERVAL.
        Duty("lapsed leases", recovery, take_back_lapsed),
        Duty("lost jobs", recovery, reaper.reenqueue_lost_jobs),
        # Tasks waiting for a per-kind slot that a lapsed lease freed.
        Duty("capped tasks", recovery, concurrency.wake_all),
        # Open circuit breakers: probes (each kind's own interval), the canary, the closing.
        Duty("breakers", 1.0, breakers.tend_breakers),
        # Batches complete by counting; one summary alert when one finished with dead tasks.
        Duty("batches", recovery, aggregate_batches),
        *_registered.values(),
    ]
