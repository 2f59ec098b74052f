"""The hot path's two transitions as lean statements, for databases that can UPDATE ... RETURNING
(PostgreSQL, SQLite 3.35+): the claim reads what the worker needs from the row it changes, and
on PostgreSQL the claim and the completion are one statement (one round trip) each.

The rules are the ORM path's (reports/services/attempts.py): the claim is the compare-and-set
`pending|retrying, attempt = n-1, kind not paused -> running, attempt = n`; the completion is
`running, attempt = n -> done`. Only the number of statements differs."""

import functools
import json
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction

from reports.models import AttemptOutcome, PausedKind, ReportTask, TaskAttempt, TaskStatus

TASK = ReportTask._meta.db_table
ATTEMPT = TaskAttempt._meta.db_table
PAUSED = PausedKind._meta.db_table
_RETURNED = ("kind", "params", "public_id", "priority", "timeout_seconds", "max_attempts", "attempts_before_run")

# Each statement finds its row by primary key; the other columns it compares are written so that
# no index can serve them (`|| ''`, `+ 0`). On a table the planner has no statistics for yet (a new
# database, a burst of submissions before autovacuum's first ANALYZE), or statistics from when no
# task had that status, it rates the index on (kind, status), (status, ...) or the partial index
# of first attempts as cheap as the key, and took them: a claim read every task of its kind, a
# completion every first attempt ever made.
_CLAIM = f"""UPDATE {TASK} SET status = %s, attempt = %s, started_at = %s, finished_at = NULL,
    next_retry_at = NULL, lease_expires_at = %s, updated_at = %s
    WHERE id = %s AND status || '' IN (%s, %s) AND attempt = %s
    AND NOT EXISTS (SELECT 1 FROM {PAUSED} WHERE {PAUSED}.kind = {TASK}.kind)"""
_OF_KIND = " AND kind || '' = %s"
_INSERT_ATTEMPT = f"""INSERT INTO {ATTEMPT}
    (task_id, number, worker, started_at, outcome, error_type, error_message, traceback)"""


def _claimed_with_attempt_row(claim: str) -> str:
    """The CTEs `claimed` (the claim, returning what the worker needs) and `attempt_row`."""
    return f"""claimed AS ({claim} RETURNING id, {", ".join(_RETURNED)}),
    attempt_row AS ({_INSERT_ATTEMPT} SELECT id, %s, %s, %s, %s, '', '', '' FROM claimed)"""


def _claim_pg(claim: str) -> str:
    # A lost claim (the server crashed before flushing it) leaves the task claimable and makes the
    # outcome of the attempt fenced, so the claim alone skips the wait for the WAL flush.
    return f"""WITH durability AS (SELECT set_config('synchronous_commit', 'off', true)),
    {_claimed_with_attempt_row(claim)}
    SELECT {", ".join(_RETURNED)} FROM claimed, durability"""


_CLAIM_PG = _claim_pg(_CLAIM)
# SQLite: the claim returning what the worker needs; the attempt row is a statement of its own.
_CLAIM_RETURNING = f"{_CLAIM} RETURNING {', '.join(_RETURNED)}"
_CLAIM_RETURNING_OF_KIND = f"{_CLAIM}{_OF_KIND} RETURNING {', '.join(_RETURNED)}"
_CLAIM_PG_OF_KIND = _claim_pg(_CLAIM + _OF_KIND)

_DONE = f"""UPDATE {TASK} SET status = %s, output_file = %s, finished_at = %s, lease_expires_at = NULL,
    last_error = '', updated_at = %s WHERE id = %s AND status || '' = %s AND attempt = %s"""
_CLOSE = f"""UPDATE {ATTEMPT} SET outcome = %s, finished_at = %s, duration_seconds = %s
    WHERE task_id = %s AND number + 0 = %s AND outcome = %s"""
# The CTEs `done` (the task row) and `closed` (its attempt row, only if the task row changed).
_DONE_AND_CLOSED = f"""done AS ({_DONE} RETURNING id),
    closed AS ({_CLOSE.replace("task_id = %s", "task_id IN (SELECT id FROM done)")})"""
_COMPLETE_PG = f"""WITH {_DONE_AND_CLOSED}
    SELECT count(*) FROM done"""


def _claim_completing_pg(claim: str) -> str:
    # The completion of the attempt a worker just finished and the claim of its next one, in one
    # statement: one round trip and one WAL flush for both (the flush the completion needs).
    return f"""WITH {_DONE_AND_CLOSED},
    {_claimed_with_attempt_row(claim)}
    SELECT (SELECT count(*) FROM done), {", ".join(f"claimed.{column}" for column in _RETURNED)}
    FROM (SELECT 1) AS one LEFT JOIN claimed ON true"""


_CLAIM_COMPLETING_PG = _claim_completing_pg(_CLAIM)
_CLAIM_COMPLETING_PG_OF_KIND = _claim_completing_pg(_CLAIM + _OF_KIND)


def _completion_params(*, task_id: int, attempt: int, output_file: str, now: datetime, duration: float | None):
    """The parameters of _DONE, and of _CLOSE up to its WHERE clause."""
    ended = _db_time(now)
    return (
        [TaskStatus.DONE, output_file, ended, ended, task_id, TaskStatus.RUNNING, attempt],
        [AttemptOutcome.SUCCEEDED, ended, duration],
    )


def _completion_pg_params(**completion) -> list:
    """The parameters of _DONE_AND_CLOSED."""
    done_params, close_params = _completion_params(**completion)
    return done_params + close_params + [completion["attempt"], AttemptOutcome.RUNNING]


@dataclass
class CarriedCompletion:
    """The completion (running -> done) of a finished attempt, handed to the next claim to go in
    its statement. `done` stays None unless that statement ran: then it says whether the attempt
    still owned its task (False: fenced by a newer attempt)."""

    task_id: int
    attempt: int
    output_file: str
    started_at: datetime
    done: bool | None = None

    def params(self, now: datetime) -> list:
        return _completion_pg_params(
            task_id=self.task_id, attempt=self.attempt, output_file=self.output_file, now=now,
            duration=(now - self.started_at).total_seconds(),
        )


def carries_completions() -> bool:
    """Whether claim(completing=...) can carry a completion: PostgreSQL's single-statement path."""
    return connection.vendor == "postgresql" and available()


def _hot_cursor(db):
    """On PostgreSQL, a cursor that binds on the server and prepares the hot statements once per
    connection (their planning was ~0.4 ms of the server's CPU a task); Django's own cursors bind
    on the client and prepare nothing, for the sake of transaction-mode poolers, which
    REPORT_DB_PREPARED_STATEMENTS=0 respects here too. Wrapped as Django wraps its own (errors,
    execute wrappers)."""
    if db.vendor != "postgresql" or not settings.REPORT_DB_PREPARED_STATEMENTS or db.queries_logged:
        # Logged queries (DEBUG, tests that count statements) take Django's path: its log reads
        # the SQL psycopg last sent, which a prepared execution does not record.
        return db.cursor()
    db.ensure_connection()
    db.validate_thread_sharing()
    raw = db.connection
    if raw.prepare_threshold is None:
        # Django turns psycopg's preparing off (None); a threshold no count reaches turns it
        # back on for the statements that ask (Django's client-binding cursors never prepare).
        raw.prepare_threshold = 2**31
    cursor = _preparing_cursor_class()(raw)
    return db.make_cursor(cursor)


@functools.cache
def _preparing_cursor_class():
    import psycopg

    class PreparingCursor(psycopg.Cursor):
        def execute(self, query, params=None, **kwargs):
            return super().execute(query, params, prepare=True)

    return PreparingCursor


def available() -> bool:
    """UPDATE ... RETURNING: PostgreSQL, and SQLite from 3.35 (MariaDB has no UPDATE RETURNING)."""
    return connection.vendor in ("postgresql", "sqlite") and connection.features.can_return_columns_from_insert


def _db_time(value: datetime, db=None):
    return (db or connection).ops.adapt_datetimefield_value(value)


def _default_db():
    # The hot path asks for the connection once: every attribute of django.db.connection goes
    # through a context-local lookup (a dozen per claim, about a sixth of its CPU).
    return connections[DEFAULT_DB_ALIAS]


def claim(
    *, task_id: int, attempt: int, worker: str, now: datetime, lease_until: datetime, in_transaction: bool,
    kind: str | None = None, completing: CarriedCompletion | None = None,
) -> ReportTask | None:
    """The claim's UPDATE and the attempt row; None: no row matched. `in_transaction`: the caller's
    transaction takes a concurrency slot after the claim, and rolls both back without one (on
    SQLite it inserts the attempt row itself once it holds the slot). `kind`: match only a task
    of this kind (the caller holds its slot already). `completing`: on PostgreSQL, outside a
    transaction, that completion goes in the claim's statement (its `done` then says how it went)."""
    db = _default_db()
    started, lease = _db_time(now, db), _db_time(lease_until, db)
    claim_params = [
        TaskStatus.RUNNING, attempt, started, lease, started,
        task_id, TaskStatus.PENDING, TaskStatus.RETRYING, attempt - 1,
    ]  # fmt: skip
    if kind is not None:
        claim_params.append(kind)
    attempt_params = [attempt, worker[:200], started, AttemptOutcome.RUNNING]
    with _hot_cursor(db) as cursor:
        if db.vendor == "postgresql" and not in_transaction and completing is not None and completing.done is None:
            statement = _CLAIM_COMPLETING_PG if kind is None else _CLAIM_COMPLETING_PG_OF_KIND
            cursor.execute(statement, completing.params(now) + claim_params + attempt_params)
            completed, *row = cursor.fetchone()
            completing.done = bool(completed)
            row = row if row[0] is not None else None
        elif db.vendor == "postgresql":  # one statement, in the caller's transaction or not
            cursor.execute(_CLAIM_PG if kind is None else _CLAIM_PG_OF_KIND, claim_params + attempt_params)
            row = cursor.fetchone()
        elif in_transaction:
            cursor.execute(_CLAIM_RETURNING_OF_KIND if kind is not None else _CLAIM_RETURNING, claim_params)
            row = cursor.fetchone()
        else:
            with transaction.atomic():
                cursor.execute(_CLAIM_RETURNING_OF_KIND if kind is not None else _CLAIM_RETURNING, claim_params)
                row = cursor.fetchone()
                if row is not None:
                    insert_attempt(cursor, task_id=task_id, attempt_params=attempt_params)
    if row is None:
        return None
    kind, params, public_id, priority, timeout, max_attempts, before_run = row
    values = dict(_unclaimed_fields())
    values.update(
        id=task_id,
        kind=kind,
        params=json.loads(params) if isinstance(params, str | bytes) else params,
        public_id=public_id if isinstance(public_id, uuid.UUID) else uuid.UUID(public_id),
        priority=priority,
        timeout_seconds=timeout,
        max_attempts=max_attempts,
        attempts_before_run=before_run,
        status=TaskStatus.RUNNING,
        attempt=attempt,
        started_at=now,
        lease_expires_at=lease_until,
        updated_at=now,
    )
    # Positional, as Django builds a row it read: its keyword path looks up every field's default
    # (a quarter of a claim's CPU).
    return ReportTask(*values.values())


@functools.cache
def _unclaimed_fields() -> tuple[tuple[str, object], ...]:
    """(attname, value) of every concrete field of ReportTask in __init__'s order: the default of
    those the claim does not return (their values on the row are not the worker's business)."""
    return tuple((field.attname, field.get_default()) for field in ReportTask._meta.concrete_fields)


def claim_inserts_attempt() -> bool:
    return connection.vendor == "postgresql"


def insert_attempt(cursor, *, task_id: int, attempt_params: list) -> None:
    cursor.execute(f"{_INSERT_ATTEMPT} VALUES (%s, %s, %s, %s, %s, '', '', '')", [task_id, *attempt_params])


def attempt_params(*, attempt: int, worker: str, now: datetime) -> list:
    return [attempt, worker[:200], _db_time(now), AttemptOutcome.RUNNING]


def complete(*, task_id: int, attempt: int, output_file: str, now: datetime, duration: float | None) -> bool:
    completion = dict(task_id=task_id, attempt=attempt, output_file=output_file, now=now, duration=duration)
    db = _default_db()
    with _hot_cursor(db) as cursor:
        if db.vendor == "postgresql":
            cursor.execute(_COMPLETE_PG, _completion_pg_params(**completion))
            return bool(cursor.fetchone()[0])
        done_params, close_params = _completion_params(**completion)
        with transaction.atomic():
            cursor.execute(_DONE, done_params)
            if cursor.rowcount != 1:
                return False
            cursor.execute(_CLOSE, close_params + [task_id, attempt, AttemptOutcome.RUNNING])
    return True
