"""Archive expired dead letters (open -> archived): batched, resumable, cron-safe. The purge of
old archived letters lives beside it in deadletters.services.purge.

- Each batch is one transaction: one conditional UPDATE ... RETURNING of the next batch_size due
  letters in (basis, id) order, so a run killed at any instruction leaves every row either done
  or untouched, and the next run carries on.
- The walk is a keyset on (basis, id) over the index (basis, id) of open letters: every batch starts
  where the last one ended, even when every row shares one expire_at (an index range scan of
  batch_size rows, never a sort of everything that is due; tests/deadletters/services/test_archive_plans.py
  shows the plan on PostgreSQL).
- On PostgreSQL a batch locks its rows with FOR UPDATE SKIP LOCKED: a letter an operator is
  acting on at that instant is left for the next run instead of blocking either side.
- `archive_lock` keeps two runs apart: flock on a file under VAR_DIR (one machine, works with
  Redis down) plus pg_try_advisory_lock on PostgreSQL (several machines).
"""

import fcntl
import hashlib
import os
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, F, Max, Q
from django.db.models.functions import Substr
from django.utils import timezone

from deadletters.audit import record_audit
from deadletters.models import AuditEntry, DeadLetter, DeadLetterStatus

ACTOR = "archive_deadletters"
SAMPLE_MESSAGE_CHARS = 200
# Any constant works: advisory locks are scoped to the current database.
_ADVISORY_KEY = int.from_bytes(
    hashlib.sha256(b"deadletters.archive_deadletters").digest()[:8], "big", signed=True
)

Progress = Callable[[str, int, int, int], None]  # (phase, batch number, rows in batch, rows so far)


class ArchiveLocked(Exception):
    """Another run holds the lock; not an error for cron."""


@dataclass
class RunResult:
    cutoff: datetime
    basis: str
    dry_run: bool
    count: int = 0  # archived / purged, or what would be in a dry run
    batches: int = 0
    # dry run: {"kind", "fingerprint", "n", "error_type", "sample_message"}, biggest first
    groups: list[dict] = field(default_factory=list)
    file: str | None = None  # purge: the run (in the archive storage) the deleted rows were written to


def lock_path() -> Path:
    db = connection.settings_dict
    ident = f"{connection.vendor}|{db.get('HOST') or ''}|{db.get('PORT') or ''}|{db['NAME']}"
    digest = hashlib.sha256(ident.encode()).hexdigest()[:12]
    return Path(settings.VAR_DIR) / "locks" / f"archive_deadletters-{digest}.lock"


@contextmanager
def archive_lock():
    path = lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ArchiveLocked(f"another archive_deadletters run holds the lock file {path}") from None
        advisory = connection.vendor == "postgresql"
        if advisory:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_lock(%s)", [_ADVISORY_KEY])
                if not cursor.fetchone()[0]:
                    raise ArchiveLocked("another archive_deadletters run holds the PostgreSQL advisory lock")
        try:
            yield
        finally:
            if advisory:
                try:
                    with connection.cursor() as cursor:
                        cursor.execute("SELECT pg_advisory_unlock(%s)", [_ADVISORY_KEY])
                except DatabaseError:
                    pass  # the connection is gone, and the session's lock with it
    finally:
        os.close(fd)  # releases the flock (the kernel does it too if the process dies)


def dry_run_groups(qs) -> list[dict]:
    """Counts by kind and fingerprint, each with its error type and a sample message (the newest
    letter's first line), so an operator reads what would go, not only hashes."""
    groups = list(
        qs.values("kind", "fingerprint")
        .annotate(n=Count("id"), sample_id=Max("id"))
        .order_by("-n", "kind", "fingerprint")
    )
    samples = {
        row["id"]: row
        for row in DeadLetter.objects.filter(pk__in=[g["sample_id"] for g in groups])
        .annotate(head=Substr("error_message", 1, SAMPLE_MESSAGE_CHARS))
        .values("id", "error_type", "head")
    }
    for group in groups:
        sample = samples.get(group.pop("sample_id"), {})
        group["error_type"] = sample.get("error_type", "")
        lines = (sample.get("head") or "").strip().splitlines()
        group["sample_message"] = lines[0] if lines else ""
    return groups


def walk_batch_sql(*, action_sql: str, basis: str, keyset: bool, batch_size: int, returning: str) -> str:
    """`action_sql ... WHERE id IN (the next batch_size due open rows after the keyset) RETURNING
    ...`: the due rows in (basis, id) order, locked with SKIP LOCKED where the database has it."""
    qn = connection.ops.quote_name
    table = qn(DeadLetter._meta.db_table)
    after = f" AND ({qn(basis)}, {qn('id')}) > (%s, %s)" if keyset else ""
    # The status is a constant written into the SQL: a partial index is used only for a predicate
    # the planner sees (SQLite never looks into a parameter).
    batch = (
        f"SELECT {qn('id')} FROM {table} WHERE {qn('status')} = '{DeadLetterStatus.OPEN}' "
        f"AND {qn(basis)} <= %s{after} "
        f"ORDER BY {qn(basis)}, {qn('id')} LIMIT {int(batch_size)}"
    )
    if connection.vendor == "postgresql":
        # ARRAY(...) runs once and hands the ids to a primary-key lookup; a plain IN (subquery)
        # lets the planner pick a hash join over the whole table on a small one.
        where = f"{qn('id')} = ANY(ARRAY({batch} FOR UPDATE SKIP LOCKED))"
    else:
        where = f"{qn('id')} IN ({batch})"
    return f"{action_sql} WHERE {where} RETURNING {returning}"


def archive_expired_dead_letters(
    *,
    older_than_days: float | None = None,
    batch_size: int = 1000,
    dry_run: bool = False,
    progress: Progress | None = None,
    now: datetime | None = None,
    pause_seconds: float = 0.0,
) -> RunResult:
    """open -> archived for letters whose expire_at has passed (or created before now - older_than_days).

    Replayed, discarded and already archived letters are never touched. Idempotent.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    now = now or timezone.now()
    if older_than_days is None:
        basis, cutoff = "expire_at", now
    else:
        basis, cutoff = "created_at", now - timedelta(days=older_than_days)
    due = Q(**{f"{basis}__lte": cutoff}, status=DeadLetterStatus.OPEN)
    result = RunResult(cutoff=cutoff, basis=basis, dry_run=dry_run)
    if dry_run:
        result.groups = dry_run_groups(DeadLetter.objects.filter(due))
        result.count = sum(group["n"] for group in result.groups)
        return result

    refresh_planner_statistics()
    audit_id = None
    after = None  # (basis value, id) of the last row archived: the next batch starts past it
    while True:
        sql, params = archive_batch_statement(
            basis=basis, cutoff=cutoff, after=after, batch_size=batch_size, now=now
        )
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                rows = cursor.fetchall()
            changed = len(rows)
            if changed and audit_id is None:
                audit_id = record_audit(
                    action="archive",
                    actor=ACTOR,
                    source="cron",
                    item_count=changed,
                    details={"basis": basis, "cutoff": cutoff.isoformat(), "complete": False},
                ).pk
            elif changed:
                AuditEntry.objects.filter(pk=audit_id).update(item_count=F("item_count") + changed)
        if not changed:
            break  # nothing due is left (or all of it is locked by an operator: the next run)
        result.count += changed
        result.batches += 1
        after = keyset_of(max(rows))
        if progress:
            progress("archive", result.batches, changed, result.count)
        if pause_seconds:
            time.sleep(pause_seconds)
    if audit_id is not None:
        mark_complete(audit_id, batches=result.batches)
    return result


def refresh_planner_statistics() -> None:
    """ANALYZE the letters table before a walk, so the planner knows how many letters each state
    holds right now (the archive phase may just have moved a million of them): both databases
    then walk the partial indexes (SQLite keeps no statistics unless asked). A sample, not a scan:
    a fraction of a second at a million rows."""
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {connection.ops.quote_name(DeadLetter._meta.db_table)}")


def archive_batch_statement(
    *, basis: str, cutoff: datetime, after: tuple | None, batch_size: int, now: datetime
) -> tuple[str, list]:
    """The one statement of an archive batch: UPDATE the next due rows after `after`, RETURNING
    their (basis, id). Also what tests EXPLAIN."""
    qn = connection.ops.quote_name
    adapt = connection.ops.adapt_datetimefield_value
    sql = walk_batch_sql(
        action_sql=f"UPDATE {qn(DeadLetter._meta.db_table)} SET {qn('status')} = %s, "
        f"{qn('archived_at')} = %s",
        basis=basis,
        keyset=after is not None,
        batch_size=batch_size,
        returning=f"{qn(basis)}, {qn('id')}",
    )
    return sql, [DeadLetterStatus.ARCHIVED, adapt(now), adapt(cutoff), *(after or ())]


def keyset_of(row: tuple) -> tuple:
    """(time, id) as returned by the database, made a query parameter again."""
    adapt = connection.ops.adapt_datetimefield_value
    return tuple(adapt(v) if isinstance(v, datetime) else v for v in row)


def mark_complete(audit_id: int, **extra) -> None:
    entry = AuditEntry.objects.get(pk=audit_id)
    AuditEntry.objects.filter(pk=audit_id).update(details={**entry.details, **extra, "complete": True})
