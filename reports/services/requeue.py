"""Putting a dead task back in the pipeline: the compare-and-set a replay is built on, for one
task (requeue_dead_task) or a set of them in one UPDATE ... RETURNING (requeue_dead_tasks, what a
bulk replay's batch uses).

The replay itself (who asked, the dead letters it resolves, the audit entry) belongs to the
layer above; this is only the task row's side of it."""

import logging
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.db.models.sql import UpdateQuery
from django.utils import timezone
from django.utils.translation import gettext as _

from reports.models import ReportTask, TaskStatus
from reports.services.enqueue import enqueue_attempts_on_commit, enqueue_next_attempt_on_commit
from reports.services.submission import validate_submission
from reports.wording import status_word

logger = logging.getLogger("reports.services")


class TaskNotFound(Exception):
    pass


class TaskNotReplayable(Exception):
    """Replay asked for a task that is not dead (already replayed, running, done).

    Its message goes to API clients, so it says when, never who: `replayed_by` (an operator's
    username) is for the console's pages only. It is in the language active where it is raised."""

    def __init__(self, task: ReportTask, replayed_by: str = "", replayed_at: datetime | None = None):
        values = {"id": task.public_id, "status": status_word(task.status)}
        if replayed_at:
            values["when"] = f"{replayed_at:%Y-%m-%d %H:%M:%S}"
            detail = _("task %(id)s is %(status)s, not dead; it was replayed at %(when)s UTC") % values
        elif replayed_by:
            detail = _("task %(id)s is %(status)s, not dead; it was replayed already") % values
        else:
            detail = _("task %(id)s is %(status)s, not dead") % values
        super().__init__(detail)
        self.task = task
        self.replayed_by = replayed_by
        self.replayed_at = replayed_at


def _fresh_run(now: datetime) -> dict:
    """dead -> pending: a fresh attempt budget counted from the attempts used so far, and nothing
    left of the dead run's retry, lease or finish. The one definition of that move, for the ORM
    update and the raw UPDATE ... RETURNING alike."""
    return {
        "status": TaskStatus.PENDING,
        "attempts_before_run": F("attempt"),
        "max_attempts": F("attempt") + settings.REPORT_MAX_ATTEMPTS,
        "next_retry_at": None,
        "lease_expires_at": None,
        "finished_at": None,
        "updated_at": now,
    }


@dataclass(frozen=True)
class Requeued:
    task: ReportTask
    params_diff: dict | None  # {"before": ..., "after": ...} when edited params changed them


def requeue_dead_task(*, task_id: int, params: dict | None = None) -> Requeued:
    """dead -> pending with a fresh attempt budget and, optionally, edited params; the next
    attempt is enqueued once the caller's transaction commits. However often this is called
    concurrently, one call wins; the others get TaskNotReplayable.

    Raises TaskNotFound, TaskNotReplayable, or InvalidParams for edited params."""
    now = timezone.now()
    with transaction.atomic():
        task = ReportTask.objects.filter(pk=task_id).first()
        if task is None:
            raise TaskNotFound(task_id)
        updates, diff = {}, None
        if params is not None:
            _kind, cleaned, _priority = validate_submission(kind=task.kind, params=params, priority=task.priority)
            if cleaned != task.params:
                updates["params"] = cleaned
                diff = {"before": task.params, "after": cleaned}
        requeued = ReportTask.objects.filter(pk=task_id, status=TaskStatus.DEAD).update(
            **_fresh_run(now), **updates
        )
        task.refresh_from_db()
        if not requeued:
            raise TaskNotReplayable(task)
        enqueue_next_attempt_on_commit(task)
    logger.info("task %s requeued after death", task.public_id)
    return Requeued(task=task, params_diff=diff)


@dataclass(frozen=True)
class RequeuedTask:
    """A task row a set-based requeue moved from dead to pending (what its enqueue needs)."""

    task_id: int
    attempt: int  # the attempt counter now; the enqueued attempt is attempt + 1
    priority: str
    timeout_seconds: int


def _has_update_returning() -> bool:
    if connection.vendor == "postgresql":
        return True
    return connection.vendor == "sqlite" and sqlite3.sqlite_version_info >= (3, 35)


def requeue_dead_tasks(task_ids: Iterable[int], *, now: datetime | None = None) -> list[RequeuedTask]:
    """dead -> pending for each of `task_ids` that is still dead, in one conditional UPDATE ...
    RETURNING (rows locked in id order, so two overlapping calls cannot deadlock); the next
    attempts are enqueued with one pipeline per queue once the caller's transaction commits.

    Returns the tasks that changed, in id order; the others (not dead any more, unknown) are
    simply absent: the caller counts them as skipped. Same fresh budget as requeue_dead_task."""
    ids = sorted({int(pk) for pk in task_ids})
    if not ids:
        return []
    now = now or timezone.now()
    with transaction.atomic():
        if _has_update_returning():
            rows = _update_returning(ids, now)
        else:
            rows = _update_then_read(ids, now)
        requeued = sorted((RequeuedTask(*row) for row in rows), key=lambda row: row.task_id)
        enqueue_attempts_on_commit(
            [(row.task_id, row.attempt + 1, row.priority, row.timeout_seconds) for row in requeued]
        )
    if requeued:
        logger.info("%s tasks requeued after death", len(requeued))
    return requeued


def _update_returning(ids: list[int], now: datetime) -> list[tuple]:
    qn = connection.ops.quote_name
    table = qn(ReportTask._meta.db_table)
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    placeholders = ", ".join(["%s"] * len(ids))
    update = UpdateQuery(ReportTask)
    update.add_update_values(_fresh_run(now))
    update_sql, update_params = update.get_compiler(connection=connection).as_sql()  # UPDATE ... SET ...
    sql = (
        f"{update_sql} "
        f"WHERE {qn('id')} IN (SELECT {qn('id')} FROM {table} WHERE {qn('id')} IN ({placeholders}) "
        f"AND {qn('status')} = %s ORDER BY {qn('id')}{lock}) "
        f"RETURNING {qn('id')}, {qn('attempt')}, {qn('priority')}, {qn('timeout_seconds')}"
    )
    params = [*update_params, *ids, TaskStatus.DEAD]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _update_then_read(ids: list[int], now: datetime) -> list[tuple]:
    # Databases without UPDATE ... RETURNING: lock, then update exactly the locked rows.
    dead = list(
        ReportTask.objects.select_for_update()
        .filter(pk__in=ids, status=TaskStatus.DEAD)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    ReportTask.objects.filter(pk__in=dead, status=TaskStatus.DEAD).update(**_fresh_run(now))
    return list(
        ReportTask.objects.filter(pk__in=dead).values_list("pk", "attempt", "priority", "timeout_seconds")
    )
