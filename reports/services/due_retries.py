"""Retries are due by the database: a failed attempt leaves its task `retrying` with next_retry_at
on the row, and whoever runs this (every worker of ours, between jobs, and each reaper pass)
promotes the due ones to `pending` and enqueues their next attempt. No process holds the due
time, so none can take it down when it dies: the promotion is a conditional UPDATE that one
caller wins per task, however many run it at once.

A paused kind's tasks are left alone; once it is resumed, they are promoted like any other."""

import logging
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from reports.models import PausedKind, ReportTask, TaskStatus
from reports.services.enqueue import enqueue_attempts_on_commit

logger = logging.getLogger("reports.services")

TASK = ReportTask._meta.db_table
PAUSED = PausedKind._meta.db_table


def _promote_sql(limit: int) -> str:
    lock = " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    return f"""UPDATE {TASK} SET status = %s, updated_at = %s
        WHERE id IN (SELECT id FROM {TASK} WHERE status = %s AND next_retry_at <= %s
            AND kind NOT IN (SELECT kind FROM {PAUSED}) ORDER BY next_retry_at LIMIT {int(limit)}{lock})
        AND status = %s
        RETURNING id, attempt, priority, timeout_seconds, kind"""


def promote_due_retries(*, now: datetime | None = None, limit: int = 500) -> int:
    """retrying -> pending for every task whose retry is due (up to `limit`); their next attempts
    are enqueued once this commits. Returns how many were promoted."""
    now = now or timezone.now()
    moment = connection.ops.adapt_datetimefield_value(now)
    with transaction.atomic():
        if connection.features.can_return_columns_from_insert:  # UPDATE ... RETURNING too
            with connection.cursor() as cursor:
                cursor.execute(
                    _promote_sql(limit),
                    [TaskStatus.PENDING, moment, TaskStatus.RETRYING, moment, TaskStatus.RETRYING],
                )
                rows = cursor.fetchall()
        else:
            rows = _promote_one_by_one(now, limit)
        enqueue_attempts_on_commit(
            [(pk, attempt + 1, priority, timeout, kind) for pk, attempt, priority, timeout, kind in rows]
        )
    if rows:
        logger.info("%s retr%s due: enqueued", len(rows), "y" if len(rows) == 1 else "ies")
    return len(rows)


def _promote_one_by_one(now: datetime, limit: int) -> list[tuple]:
    due = list(
        ReportTask.objects.filter(status=TaskStatus.RETRYING, next_retry_at__lte=now)
        .exclude(kind__in=PausedKind.objects.values("kind"))
        .order_by("next_retry_at")
        .values_list("pk", "attempt", "priority", "timeout_seconds", "kind")[:limit]
    )
    return [
        row
        for row in due
        if ReportTask.objects.filter(pk=row[0], status=TaskStatus.RETRYING, attempt=row[1]).update(
            status=TaskStatus.PENDING, updated_at=now
        )
    ]
