"""Archive expired dead letters and purge old archived ones: batched, resumable, cron-safe.

- Each batch is one transaction with a conditional UPDATE (or DELETE), so a run killed at
  any instruction leaves every row either done or untouched, and the next run carries on.
- Memory stays flat: ids are read a batch at a time (never all of them), purged rows are
  streamed into the gzip file `PURGE_FETCH` at a time.
- Purge writes each batch to the run's gzip JSON-lines file and fsyncs it before the rows
  are deleted (in the same transaction that locked them), so nothing is destroyed without
  a copy on disk. Each batch is its own gzip member: a crash leaves a readable file.
- `archive_lock` keeps two runs apart: flock on a file under VAR_DIR (one machine, works with
  Redis down) plus pg_try_advisory_lock on PostgreSQL (several machines).
"""

import fcntl
import hashlib
import json
import os
import time
import zlib
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from deadletters.models import AuditEntry, DeadLetter, DeadLetterStatus
from deadletters.services import record_audit

ACTOR = "archive_deadletters"
PURGE_FETCH = 100
# Any constant works: advisory locks are scoped to the current database.
_ADVISORY_KEY = int.from_bytes(
    hashlib.sha256(b"deadletters.archive_deadletters").digest()[:8], "big", signed=True
)
PURGE_FIELDS = (
    "id",
    "task_id",
    "task__public_id",
    "kind",
    "params",
    "error_type",
    "error_message",
    "traceback",
    "attempts",
    "fingerprint",
    "status",
    "created_at",
    "expire_at",
    "replayed_at",
    "replayed_by",
    "archived_at",
    "discarded_at",
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
    groups: list[dict] = field(default_factory=list)  # dry run: {"kind", "fingerprint", "n"}
    file: Path | None = None  # purge: the file the deleted rows were written to


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


def _groups(qs) -> list[dict]:
    return list(
        qs.values("kind", "fingerprint").annotate(n=Count("id")).order_by("-n", "kind", "fingerprint")
    )


# --- archive ------------------------------------------------------------------


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
        result.groups = _groups(DeadLetter.objects.filter(due))
        result.count = sum(group["n"] for group in result.groups)
        return result

    audit_id = None
    floor = None  # rows before it were handled: lets the index seek past them
    while True:
        batch = DeadLetter.objects.filter(due)
        if floor is not None:
            batch = batch.filter(**{f"{basis}__gte": floor})
        rows = list(batch.order_by(basis, "id").values_list("id", basis)[:batch_size])
        if not rows:
            break
        ids = [pk for pk, _ in rows]
        with transaction.atomic():
            changed = DeadLetter.objects.filter(due, pk__in=ids).update(
                status=DeadLetterStatus.ARCHIVED, archived_at=now
            )
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
        result.count += changed
        result.batches += 1
        floor = rows[-1][1]
        if progress:
            progress("archive", result.batches, changed, result.count)
        if not changed:
            break  # everything selected changed under us (console action): the next run looks again
        if pause_seconds:
            time.sleep(pause_seconds)
    if audit_id is not None:
        _mark_complete(audit_id, batches=result.batches)
    return result


def _mark_complete(audit_id: int, **extra) -> None:
    entry = AuditEntry.objects.get(pk=audit_id)
    AuditEntry.objects.filter(pk=audit_id).update(details={**entry.details, **extra, "complete": True})


# --- purge --------------------------------------------------------------------


def purge_file_path(now: datetime) -> Path:
    return Path(settings.ARCHIVE_DIR) / f"deadletters-{now:%Y%m%dT%H%M%S%fZ}-{os.getpid()}.jsonl.gz"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def purge_archived_dead_letters(
    *,
    older_than_days: float,
    batch_size: int = 1000,
    dry_run: bool = False,
    progress: Progress | None = None,
    now: datetime | None = None,
    pause_seconds: float = 0.0,
) -> RunResult:
    """Delete letters archived more than `older_than_days` ago, after writing each to the run's
    gzip JSON-lines file under ARCHIVE_DIR (one file per run, created only if a row is purged)."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if older_than_days < 0:
        raise ValueError("older_than_days must not be negative")
    now = now or timezone.now()
    cutoff = now - timedelta(days=older_than_days)
    due = Q(status=DeadLetterStatus.ARCHIVED, archived_at__lte=cutoff)
    result = RunResult(cutoff=cutoff, basis="archived_at", dry_run=dry_run)
    if dry_run:
        result.groups = _groups(DeadLetter.objects.filter(due))
        result.count = sum(group["n"] for group in result.groups)
        return result

    fd = None
    audit_id = None
    last_id = 0
    try:
        while True:
            ids = list(
                DeadLetter.objects.filter(due, pk__gt=last_id)
                .order_by("id")
                .values_list("id", flat=True)[:batch_size]
            )
            if not ids:
                break
            last_id = ids[-1]
            if fd is None:
                result.file = purge_file_path(now)
                result.file.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(result.file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o640)
            with transaction.atomic():
                deleted = _purge_batch(fd, ids, due)
                if deleted and audit_id is None:
                    audit_id = record_audit(
                        action="purge",
                        actor=ACTOR,
                        source="cron",
                        item_count=deleted,
                        details={"cutoff": cutoff.isoformat(), "file": str(result.file), "complete": False},
                    ).pk
                elif deleted:
                    AuditEntry.objects.filter(pk=audit_id).update(item_count=F("item_count") + deleted)
            result.count += deleted
            result.batches += 1
            if progress:
                progress("purge", result.batches, deleted, result.count)
            if pause_seconds:
                time.sleep(pause_seconds)
    finally:
        if fd is not None:
            os.close(fd)
    if audit_id is not None:
        _mark_complete(audit_id, batches=result.batches)
    return result


def _purge_batch(fd: int, ids: list[int], due: Q) -> int:
    """Inside a transaction: lock the rows, write them as one gzip member, fsync, delete them."""
    rows = DeadLetter.objects.filter(due, pk__in=ids).order_by("id")
    if connection.features.has_select_for_update:
        rows = rows.select_for_update(of=("self",))
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: a gzip member
    written: list[int] = []
    for row in rows.values(*PURGE_FIELDS).iterator(chunk_size=PURGE_FETCH):
        row["task_public_id"] = row.pop("task__public_id")
        line = json.dumps(row, cls=DjangoJSONEncoder, ensure_ascii=False, sort_keys=True) + "\n"
        _write_all(fd, compressor.compress(line.encode()))
        written.append(row["id"])
    if not written:
        return 0
    _write_all(fd, compressor.flush())
    os.fsync(fd)
    # Locked above (PostgreSQL) or under the write lock (SQLite): exactly the written rows go.
    _, per_model = DeadLetter.objects.filter(pk__in=written).only("id").delete()
    return per_model.get(DeadLetter._meta.label, 0)
