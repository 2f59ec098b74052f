"""The engine's statements, one set per database, chosen once (`statements()`): the transitions of
reports/services/engine.py that run as raw SQL, because they run for every task (the claim, the
completion) or for sets of tasks (promoting due retries, requeueing dead tasks).

The rules are the engine's: the claim is the compare-and-set `pending|retrying, attempt = n-1,
kind not paused -> running, attempt = n`; the completion `running, attempt = n -> done`. Only the
number of statements differs: PostgreSQL does each in one (prepared once per connection), SQLite
in a transaction of two.

Each statement finds its row by primary key; the other columns it compares are written so that no
index can serve them (`|| ''`, `+ 0`). On a table the planner has no statistics for yet (a new
database, a burst of submissions before autovacuum's first ANALYZE) PostgreSQL rated the index on
(kind, status), those on (status, ...) or the partial index of first attempts as cheap as the key,
and took them: a claim read every task of its kind, a completion every first attempt ever made."""

import functools
import json
import uuid
from datetime import datetime

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models.sql import UpdateQuery

from reports.models import AttemptOutcome, PausedKind, ReportTask, TaskAttempt, TaskStatus

TASK = ReportTask._meta.db_table
ATTEMPT = TaskAttempt._meta.db_table
PAUSED = PausedKind._meta.db_table
RETURNED = (
    "kind", "params", "public_id", "priority", "timeout_seconds", "max_attempts", "attempts_before_run"
)

CLAIM = f"""UPDATE {TASK} SET status = %s, attempt = %s, started_at = %s, finished_at = NULL,
    next_retry_at = NULL, lease_expires_at = %s, updated_at = %s
    WHERE id = %s AND status || '' IN (%s, %s) AND attempt = %s
    AND NOT EXISTS (SELECT 1 FROM {PAUSED} WHERE {PAUSED}.kind = {TASK}.kind)"""
OF_KIND = " AND kind || '' = %s"
INSERT_ATTEMPT = f"""INSERT INTO {ATTEMPT}
    (task_id, number, worker, started_at, outcome, error_type, error_message, traceback)"""
DONE = f"""UPDATE {TASK} SET status = %s, output_file = %s, finished_at = %s, lease_expires_at = NULL,
    last_error = '', updated_at = %s WHERE id = %s AND status || '' = %s AND attempt = %s"""
CLOSE = f"""UPDATE {ATTEMPT} SET outcome = %s, finished_at = %s, duration_seconds = %s
    WHERE task_id = %s AND number + 0 = %s AND outcome = %s"""


def _db():
    # The hot path asks for the connection once: every attribute of django.db.connection goes
    # through a context-local lookup (a dozen per claim, about a sixth of its CPU).
    return connections[DEFAULT_DB_ALIAS]


class SqliteStatements:
    """SQLite 3.35+ (UPDATE ... RETURNING): the claim and the completion are two statements in a
    transaction; no row locks to take (SQLite writes one at a time)."""

    lock = ""
    skip_locked = ""

    def cursor(self, db):
        return db.cursor()

    def claim(self, *, task_id, attempt, worker, now, lease_until, kind=None) -> tuple | None:
        """The claim's UPDATE and the attempt row, returning RETURNED; None: no row matched."""
        db = _db()
        claim_params, attempt_params = _claim_params(db, task_id, attempt, worker, now, lease_until, kind)
        statement = f"{CLAIM}{OF_KIND if kind is not None else ''} RETURNING {', '.join(RETURNED)}"
        with self.cursor(db) as cursor, transaction.atomic(savepoint=False):
            cursor.execute(statement, claim_params)
            row = cursor.fetchone()
            if row is not None:
                cursor.execute(f"{INSERT_ATTEMPT} VALUES (%s, %s, %s, %s, %s, '', '', '')",
                               [task_id, *attempt_params])
        return row

    def complete(self, *, task_id, attempt, output_file, now, duration) -> bool:
        db = _db()
        done_params, close_params = _completion_params(db, task_id, attempt, output_file, now, duration)
        with self.cursor(db) as cursor, transaction.atomic(savepoint=False):
            cursor.execute(DONE, done_params)
            if cursor.rowcount != 1:
                return False
            cursor.execute(CLOSE, close_params + [task_id, attempt, AttemptOutcome.RUNNING])
        return True

    def promote_due(self, *, now: datetime, limit: int) -> list[tuple]:
        """retrying -> pending for up to `limit` due tasks of kinds not paused, returning (id,
        attempt, priority, timeout_seconds, kind) of each."""
        moment = _db().ops.adapt_datetimefield_value(now)
        statement = f"""UPDATE {TASK} SET status = %s, updated_at = %s
            WHERE id IN (SELECT id FROM {TASK} WHERE status = %s AND next_retry_at <= %s
                AND kind NOT IN (SELECT kind FROM {PAUSED}) ORDER BY next_retry_at
                LIMIT {int(limit)}{self.skip_locked})
            AND status = %s
            RETURNING id, attempt, priority, timeout_seconds, kind"""
        with _db().cursor() as cursor:
            retrying = TaskStatus.RETRYING
            cursor.execute(statement, [TaskStatus.PENDING, moment, retrying, moment, retrying])
            return cursor.fetchall()

    def requeue_dead(self, *, ids: list[int], changes: dict) -> list[tuple]:
        """dead -> pending (`changes`) for each of `ids` still dead, rows locked in id order (so two
        overlapping calls cannot deadlock), returning (id, attempt, priority, timeout_seconds)."""
        db = _db()
        qn = db.ops.quote_name
        update = UpdateQuery(ReportTask)
        update.add_update_values(changes)
        update_sql, update_params = update.get_compiler(connection=db).as_sql()  # UPDATE ... SET ...
        placeholders = ", ".join(["%s"] * len(ids))
        statement = (
            f"{update_sql} WHERE {qn('id')} IN (SELECT {qn('id')} FROM {qn(TASK)} "
            f"WHERE {qn('id')} IN ({placeholders}) AND {qn('status')} = %s ORDER BY {qn('id')}{self.lock}) "
            f"RETURNING {qn('id')}, {qn('attempt')}, {qn('priority')}, {qn('timeout_seconds')}"
        )
        with db.cursor() as cursor:
            cursor.execute(statement, [*update_params, *ids, TaskStatus.DEAD])
            return cursor.fetchall()


class PostgresStatements(SqliteStatements):
    """PostgreSQL: the claim (with its attempt row) and the completion (with its attempt row's
    close) are one statement each, prepared once per connection; the claim commits without
    waiting for the WAL flush (a lost claim leaves the task claimable and its attempt's outcome
    fenced)."""

    lock = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"

    @staticmethod
    def claim_statement(kind_too: bool) -> str:
        claim = CLAIM + (OF_KIND if kind_too else "")
        return f"""WITH durability AS (SELECT set_config('synchronous_commit', 'off', true)),
            claimed AS ({claim} RETURNING id, {", ".join(RETURNED)}),
            attempt_row AS ({INSERT_ATTEMPT} SELECT id, %s, %s, %s, %s, '', '', '' FROM claimed)
            SELECT {", ".join(RETURNED)} FROM claimed, durability"""

    COMPLETE = f"""WITH done AS ({DONE} RETURNING id),
        closed AS ({CLOSE.replace("task_id = %s", "task_id IN (SELECT id FROM done)")})
        SELECT count(*) FROM done"""

    def cursor(self, db):
        """A cursor that binds on the server and prepares the statement once per connection (its
        planning was ~0.4 ms of the server's CPU a task); Django's own cursors bind on the client
        and prepare nothing, for the sake of transaction-mode poolers, which
        REPORT_DB_PREPARED_STATEMENTS=0 respects here too. Wrapped as Django wraps its own."""
        if not settings.REPORT_DB_PREPARED_STATEMENTS or db.queries_logged:
            # Logged queries (DEBUG, tests that count statements) take Django's path: its log reads
            # the SQL psycopg last sent, which a prepared execution does not record.
            return db.cursor()
        db.ensure_connection()
        db.validate_thread_sharing()
        raw = db.connection
        if raw.prepare_threshold is None:
            # Django turns psycopg's preparing off (None); a threshold no count reaches turns it
            # back on for the statements that ask.
            raw.prepare_threshold = 2**31
        return db.make_cursor(_preparing_cursor_class()(raw))

    def claim(self, *, task_id, attempt, worker, now, lease_until, kind=None) -> tuple | None:
        db = _db()
        claim_params, attempt_params = _claim_params(db, task_id, attempt, worker, now, lease_until, kind)
        with self.cursor(db) as cursor:
            cursor.execute(_PG_CLAIM[kind is not None], claim_params + attempt_params)
            return cursor.fetchone()

    def complete(self, *, task_id, attempt, output_file, now, duration) -> bool:
        db = _db()
        done_params, close_params = _completion_params(db, task_id, attempt, output_file, now, duration)
        with self.cursor(db) as cursor:
            cursor.execute(self.COMPLETE, done_params + close_params + [attempt, AttemptOutcome.RUNNING])
            return bool(cursor.fetchone()[0])


_PG_CLAIM = {False: PostgresStatements.claim_statement(False), True: PostgresStatements.claim_statement(True)}
_BY_VENDOR = {"postgresql": PostgresStatements(), "sqlite": SqliteStatements()}


def statements() -> SqliteStatements:
    """The statements of the default database's kind (PostgreSQL or SQLite)."""
    return _BY_VENDOR[_db().vendor]


@functools.cache
def _preparing_cursor_class():
    import psycopg

    class PreparingCursor(psycopg.Cursor):
        def execute(self, query, params=None, **kwargs):
            return super().execute(query, params, prepare=True)

    return PreparingCursor


def _claim_params(db, task_id, attempt, worker, now, lease_until, kind):
    started, lease = db.ops.adapt_datetimefield_value(now), db.ops.adapt_datetimefield_value(lease_until)
    claim = [TaskStatus.RUNNING, attempt, started, lease, started,
             task_id, TaskStatus.PENDING, TaskStatus.RETRYING, attempt - 1]
    if kind is not None:
        claim.append(kind)
    return claim, [attempt, worker[:200], started, AttemptOutcome.RUNNING]


def _completion_params(db, task_id, attempt, output_file, now, duration):
    """The parameters of DONE, and of CLOSE up to its WHERE clause."""
    ended = db.ops.adapt_datetimefield_value(now)
    return (
        [TaskStatus.DONE, output_file, ended, ended, task_id, TaskStatus.RUNNING, attempt],
        [AttemptOutcome.SUCCEEDED, ended, duration],
    )


def claimed_task(row: tuple, *, task_id: int, attempt: int, now: datetime, lease_until: datetime):
    """The ReportTask a claim left, from what it returned, without reading the row again."""
    values = dict(_unclaimed_fields())
    kind, params, public_id, priority, timeout, max_attempts, before_run = row
    values.update(
        id=task_id, kind=kind, params=json.loads(params) if isinstance(params, str | bytes) else params,
        public_id=public_id if isinstance(public_id, uuid.UUID) else uuid.UUID(public_id),
        priority=priority, timeout_seconds=timeout, max_attempts=max_attempts, attempts_before_run=before_run,
        status=TaskStatus.RUNNING, attempt=attempt, started_at=now, lease_expires_at=lease_until,
        updated_at=now,
    )
    # Positional, as Django builds a row it read: its keyword path looks up every field's default
    # (a quarter of a claim's CPU).
    return ReportTask(*values.values())


@functools.cache
def _unclaimed_fields() -> tuple[tuple[str, object], ...]:
    """(attname, default) of every concrete field of ReportTask in __init__'s order: the claim
    does not return the others (their values on the row are not the worker's business)."""
    return tuple((field.attname, field.get_default()) for field in ReportTask._meta.concrete_fields)
