"""What /metrics reads of the pipeline, each one aggregate query on an indexed column: tasks by
kind and status, the longest wait per queue, the event counters, and the duration and queue-wait
histograms of the attempts that finished in a recent window."""

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, DurationField, ExpressionWrapper, F, Min, Q, Sum
from django.utils import timezone

from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskCounter, TaskStatus

DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
WAIT_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


@dataclass(frozen=True)
class WindowHistogram:
    """Per kind: cumulative counts at each bucket bound (then +Inf) and the sum, in seconds."""

    kind: str
    buckets: list[tuple[float, int]]
    count: int
    total: float


def task_counts() -> list[tuple[str, str, int]]:
    """(kind, status, tasks): an index-only scan of task_kind_status."""
    rows = ReportTask.objects.order_by().values_list("kind", "status").annotate(n=Count("pk"))
    return [(kind, status, n) for kind, status, n in rows]


def oldest_waiting_seconds(now=None) -> dict[str, float]:
    """Per queue (priority): how long the longest-waiting claimable task has waited. A pending task
    waits since it became pending (submit or replay: its updated_at), a retrying one since its
    retry fell due. Queues with nothing waiting are absent."""
    now = now or timezone.now()
    since: dict[str, object] = {}
    pending = (
        ReportTask.objects.filter(status=TaskStatus.PENDING)
        .order_by()
        .values_list("priority")
        .annotate(oldest=Min("updated_at"))
    )
    due = (
        ReportTask.objects.filter(status=TaskStatus.RETRYING, next_retry_at__lte=now)
        .order_by()
        .values_list("priority")
        .annotate(oldest=Min("next_retry_at"))
    )
    for priority, oldest in [*pending, *due]:
        if oldest is not None and (priority not in since or oldest < since[priority]):
            since[priority] = oldest
    return {priority: max((now - moment).total_seconds(), 0.0) for priority, moment in since.items()}


def event_counters() -> list[tuple[str, str, int]]:
    """(kind, event, count) of reports.models.TaskCounter: deaths, cancellations, stops."""
    return list(TaskCounter.objects.order_by("kind", "event").values_list("kind", "event", "count"))


def _histograms(queryset, value, buckets, *, as_seconds) -> list[WindowHistogram]:
    bounds = {
        f"le_{i}": Count("pk", filter=Q(**{f"{value}__lte": as_seconds(bound)}))
        for i, bound in enumerate(buckets)
    }
    rows = queryset.order_by().values("task__kind").annotate(n=Count("pk"), total=Sum(value), **bounds)
    result = []
    for row in rows:
        total = row["total"]
        total = total.total_seconds() if isinstance(total, timedelta) else float(total or 0)
        result.append(
            WindowHistogram(
                kind=row["task__kind"],
                buckets=[(bound, row[f"le_{i}"]) for i, bound in enumerate(buckets)],
                count=row["n"],
                total=total,
            )
        )
    return result


def recent_attempts(window_seconds: int, now=None):
    """The attempts that finished in the last `window_seconds` (the attempt_finished_at index)."""
    now = now or timezone.now()
    return TaskAttempt.objects.filter(
        finished_at__gt=now - timedelta(seconds=window_seconds), finished_at__lte=now
    )


def duration_histograms(window_seconds: int, now=None) -> list[WindowHistogram]:
    """How long the attempts that finished in the window ran, whatever their outcome."""
    attempts = recent_attempts(window_seconds, now).exclude(duration_seconds=None)
    return _histograms(attempts, "duration_seconds", DURATION_BUCKETS, as_seconds=float)


def queue_wait_histograms(window_seconds: int, now=None) -> list[WindowHistogram]:
    """Submit to first start, of the first attempts that finished in the window. Later attempts are
    left out: their wait includes the backoff they were told to wait."""
    attempts = (
        recent_attempts(window_seconds, now)
        .filter(number=1)
        .exclude(outcome=AttemptOutcome.RUNNING)
        .annotate(
            wait=ExpressionWrapper(F("started_at") - F("task__created_at"), output_field=DurationField())
        )
    )
    return _histograms(attempts, "wait", WAIT_BUCKETS, as_seconds=lambda s: timedelta(seconds=s))
