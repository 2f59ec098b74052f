"""What /metrics reads of the pipeline, none of it a scan of the whole history: live tasks by kind
and status, the longest wait per queue, the event counters, completions counted up to a
checkpoint, and the duration and queue-wait histograms of the attempts that finished in a recent
window (index attempt_finished_at)."""

from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import Count, DurationField, ExpressionWrapper, F, Min, OuterRef, Q, Subquery, Sum
from django.utils import timezone

from reports.kinds import KINDS
from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskCounter, TaskStatus
from reports.services.counters import bump_counter

DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
WAIT_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


@dataclass(frozen=True)
class WindowHistogram:
    """Per kind: cumulative counts at each bucket bound (then +Inf) and the sum, in seconds."""

    kind: str
    buckets: list[tuple[float, int]]
    count: int
    total: float


LIVE_STATUSES = (TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.RETRYING)
COMPLETIONS = "completions"
# Attempts are counted into the checkpoint once they finished this long ago: an attempt row is
# committed moments after its finished_at (later still from a host whose clock lags).
CHECKPOINT_LAG = timedelta(minutes=5)
CHECKPOINT_EVERY = timedelta(minutes=1)


# An attempt's kind by a lookup of its task's primary key per attempt, never a join that the
# planner may answer with a scan of every task.
_KIND = Subquery(ReportTask.objects.filter(pk=OuterRef("task_id")).values("kind")[:1])


def live_task_counts() -> list[tuple[str, str, int]]:
    """(kind, status, tasks) of the statuses a task leaves (pending, running, retrying), every kind and
    status present (0 when idle, so a dashboard's kinds and panels never go empty): the backlog, a
    range of the (status, created_at) index. The ever-growing terminal statuses are counters."""
    counts = dict.fromkeys(((kind, str(status)) for kind in KINDS for status in LIVE_STATUSES), 0)
    rows = (
        ReportTask.objects.filter(status__in=LIVE_STATUSES)
        .order_by()
        .values_list("kind", "status")
        .annotate(n=Count("pk"))
    )
    counts.update(((kind, status), n) for kind, status, n in rows)
    return [(kind, status, n) for (kind, status), n in sorted(counts.items())]


def infrastructure_waits() -> list[tuple[str, int, object]]:
    """(component, tasks, since) of the live tasks waiting out an outage of ours (the report storage,
    the database, Redis: reports/services/infra_waits.py), the longest first; the same range of the
    (status, created_at) index as the backlog."""
    rows = (
        ReportTask.objects.filter(status__in=LIVE_STATUSES, waiting_for__isnull=False)
        .order_by()
        .values_list("waiting_for")
        .annotate(n=Count("pk"), since=Min("waiting_since"))
    )
    return sorted(rows, key=lambda row: row[2])


def completions(now=None) -> dict[str, int]:
    """Tasks that finished done, per kind: succeeded attempts (a done task has exactly one; tasks and
    attempts are never deleted) counted up to a checkpoint once, plus those finished since."""
    now = now or timezone.now()
    rows = list(TaskCounter.objects.filter(event=COMPLETIONS).values_list("kind", "count", "counted_through"))
    marker = next((row for row in rows if row[0] == ""), None)
    through = marker[2] if marker else None
    if marker is None or through is None or through < now - CHECKPOINT_LAG - CHECKPOINT_EVERY:
        _advance_checkpoint(marker_exists=marker is not None, through=through, until=now - CHECKPOINT_LAG)
    counts = {kind: count for kind, count, _ in rows if kind}
    for kind, n in _succeeded_by_kind(after=through, until=None):
        counts[kind] = counts.get(kind, 0) + n
    return counts


def _succeeded_by_kind(*, after, until):
    attempts = TaskAttempt.objects.filter(outcome=AttemptOutcome.SUCCEEDED)
    if after is not None:
        attempts = attempts.filter(finished_at__gt=after)
    if until is not None:
        attempts = attempts.filter(finished_at__lte=until)
    return attempts.annotate(kind=_KIND).order_by().values_list("kind").annotate(n=Count("pk"))


def _advance_checkpoint(*, marker_exists: bool, through, until) -> None:
    """Move the checkpoint from `through` to `until`, adding what finished between. The conditional
    UPDATE of the marker makes one of several concurrent scrapes do it, and only once."""
    if not marker_exists:
        try:
            with transaction.atomic():
                TaskCounter.objects.create(kind="", event=COMPLETIONS, count=0, counted_through=None)
        except IntegrityError:
            pass  # another scrape made it
    if through is not None and until <= through:
        return
    with transaction.atomic():
        if not TaskCounter.objects.filter(kind="", event=COMPLETIONS, counted_through=through).update(
            counted_through=until
        ):
            return
        for kind, n in _succeeded_by_kind(after=through, until=until):
            bump_counter(kind=kind, event=COMPLETIONS, by=n)


def oldest_waiting_seconds(now=None) -> dict[str, float]:
    """Per queue (priority): how long the longest-waiting claimable task has waited. A pending task
    waits since it became pending (submit or replay: its updated_at), a retrying one since its
    retry fell due, or since it began to wait out an outage of ours (its waiting_since: the stalled
    queue's alert fires for a long outage too). Queues with nothing waiting are absent."""
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
    outage = (
        ReportTask.objects.filter(status=TaskStatus.RETRYING, waiting_since__isnull=False)
        .order_by()
        .values_list("priority")
        .annotate(oldest=Min("waiting_since"))
    )
    for priority, oldest in [*pending, *due, *outage]:
        if oldest is not None and (priority not in since or oldest < since[priority]):
            since[priority] = oldest
    return {priority: max((now - moment).total_seconds(), 0.0) for priority, moment in since.items()}


def event_counters() -> list[tuple[str, str, int]]:
    """(kind, event, count) of reports.models.TaskCounter: deaths, cancellations, stops."""
    rows = TaskCounter.objects.exclude(event=COMPLETIONS).order_by("kind", "event")
    return list(rows.values_list("kind", "event", "count"))


def _histograms(queryset, value, buckets, *, as_seconds) -> list[WindowHistogram]:
    queryset = queryset.annotate(
        kind=Subquery(ReportTask.objects.filter(pk=OuterRef("task_id")).values("kind")[:1])
    )
    bounds = {
        f"le_{i}": Count("pk", filter=Q(**{f"{value}__lte": as_seconds(bound)}))
        for i, bound in enumerate(buckets)
    }
    rows = queryset.order_by().values("kind").annotate(n=Count("pk"), total=Sum(value), **bounds)
    result = []
    for row in rows:
        total = row["total"]
        total = total.total_seconds() if isinstance(total, timedelta) else float(total or 0)
        result.append(
            WindowHistogram(
                kind=row["kind"],
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
    if connection.vendor == "postgresql":
        return _rows_to_histograms(_fetch(*queue_wait_statement(window_seconds, now)), WAIT_BUCKETS)
    attempts = (
        recent_attempts(window_seconds, now)
        .filter(number=1)
        .exclude(outcome=AttemptOutcome.RUNNING)
        .annotate(
            wait=ExpressionWrapper(F("started_at") - F("task__created_at"), output_field=DurationField())
        )
    )
    return _histograms(attempts, "wait", WAIT_BUCKETS, as_seconds=lambda s: timedelta(seconds=s))


def queue_wait_statement(window_seconds: int, now=None) -> tuple[str, list]:
    """PostgreSQL: the queue-wait histogram per kind. Each attempt of the window reads its task by
    primary key (LATERAL ... OFFSET 0 keeps the planner from turning that into a join, which it
    answers with a scan of every task once the window holds more than a few hundred attempts):
    the cost follows the window, never the history."""
    now = now or timezone.now()
    qn = connection.ops.quote_name
    attempts, tasks = qn(TaskAttempt._meta.db_table), qn(ReportTask._meta.db_table)
    bounds = ", ".join("count(*) FILTER (WHERE wait <= %s)" for _ in WAIT_BUCKETS)
    sql = f"""SELECT kind, count(*), coalesce(sum(wait), 0), {bounds} FROM (
        SELECT t.kind, EXTRACT(EPOCH FROM a.started_at - t.created_at)::float8 AS wait
        FROM {attempts} a CROSS JOIN LATERAL (
            SELECT kind, created_at FROM {tasks} WHERE id = a.task_id OFFSET 0) t
        WHERE a.finished_at > %s AND a.finished_at <= %s AND a.number = 1 AND a.outcome <> %s
    ) waits GROUP BY kind"""
    params = [*WAIT_BUCKETS, now - timedelta(seconds=window_seconds), now, AttemptOutcome.RUNNING]
    return sql, params


def _fetch(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _rows_to_histograms(rows: list[tuple], buckets) -> list[WindowHistogram]:
    return [
        WindowHistogram(
            kind=kind,
            buckets=list(zip(buckets, counts, strict=True)),
            count=n,
            total=float(total),
        )
        for kind, n, total, *counts in rows
    ]
