"""One pass of the housekeeper's recovery duties at once, as the recovery tests want it: due retries
promoted, lapsed leases taken back, lost jobs enqueued again (reports/housekeeper/duties.py)."""

from dataclasses import dataclass
from datetime import datetime

from reports.housekeeper.reaper import reenqueue_lost_jobs
from reports.services import promote_due_retries, take_back_lapsed


@dataclass
class ReapReport:
    abandoned: int = 0
    reenqueued: int = 0
    promoted: int = 0
    skipped_locked: bool = False


def reap_tasks(*, now: datetime | None = None, batch_size: int = 500, use_lock: bool = True) -> ReapReport:
    # Promoted before the recovery: an attempt taken back is retried from the next pass, so a
    # pass never both recovers and resends the same task.
    report = ReapReport(promoted=promote_due_retries(now=now, limit=batch_size))
    report.abandoned = take_back_lapsed(now=now, limit=batch_size)
    reenqueued = reenqueue_lost_jobs(now=now, batch_size=batch_size, use_lock=use_lock)
    report.skipped_locked = reenqueued is None
    report.reenqueued = reenqueued or 0
    return report
