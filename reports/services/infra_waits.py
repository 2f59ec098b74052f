"""Our own outages are not a task's fault. An attempt that failed because the report storage, the
database or Redis did (reports/errors.py:failure_origin) is not charged to its task: the engine's
record_attempt_failure moves it to retrying as any failure, but with a budget one attempt larger
(the attempt number, the fencing token, advances all the same), after a backoff of its own capped
at a minute, and the attempt's outcome is "infra". The row says what the task waits for and since
when: the dashboard, /metrics and the oldest-waiting figure the stalled-queue alert reads.

Bounded: once a task has waited INFRA_WAIT_LIMIT, our failures are charged to it as any other, so
a disk that never comes back ends in dead letters (and their alerts), not in tries for ever."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F

from config.backoff import backoff_delay, doubling
from reports.errors import INFRASTRUCTURE, FailureInfo
from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus

INFRA_BACKOFF = doubling(0.5, 60.0)
INFRA_WAIT_LIMIT = timedelta(hours=6)
NOT_WAITING = {"waiting_for": None, "waiting_since": None}


def waits_event(component: str) -> str:
    """The TaskCounter event (reports/services/counters.py) of the waits for one component."""
    return f"waits_{component}"


def infra_wait(task: ReportTask, failure: FailureInfo, now: datetime) -> dict | None:
    """The running row's changes when `failure` is our infrastructure's and the task may still
    wait for it (retrying, uncharged); None: it is charged as any failure."""
    if failure.origin not in INFRASTRUCTURE:
        return None
    since = task.waiting_since or now
    if now - since >= INFRA_WAIT_LIMIT:
        return None
    waited = TaskAttempt.objects.filter(task_id=task.pk, outcome=AttemptOutcome.INFRA, finished_at__gte=since)
    delay = backoff_delay(waited.count() + 1, INFRA_BACKOFF, jitter=settings.REPORT_RETRY_JITTER)
    return {
        "status": TaskStatus.RETRYING, "next_retry_at": now + timedelta(seconds=delay),
        "max_attempts": F("max_attempts") + 1, "waiting_for": failure.origin, "waiting_since": since,
    }


def charged_wait(failure: FailureInfo) -> dict:
    """A charged failure of the task's own ends its wait; one of ours (past the limit) keeps it."""
    return {} if failure.origin in INFRASTRUCTURE else NOT_WAITING
