"""Purge old archived dead letters: delete them after writing each to the run's export in the
"archive" storage (STORAGES: ARCHIVE_DIR, or a bucket), exactly once across crashes.

Each batch is one transaction: take the next batch_size due letters in (archived_at, id) order
(on PostgreSQL one DELETE ... RETURNING them as JSON lines built by the database, rows locked
with FOR UPDATE SKIP LOCKED; elsewhere a SELECT, then a DELETE by id, the lines built by Python),
remove what references them (alert outbox rows go, audit entries keep their text with the letter
link cleared), store them as the run's next part (`<run>/part-NNNNNN.jsonl.gz`, one gzip member:
an object store cannot append, so a part is written whole under its final name; on the local
disk it is fsynced) and record the new committed part count and the part's sha256 in the run's
ledger (its purge audit entry) before the commit. So:

- nothing is destroyed without a stored copy (the part is stored before the commit);
- a run killed at any instruction leaves, at most, one part past the ledger's committed count
  whose rows were not deleted. The next run (under the same lock) deletes every killed run's
  parts past its committed count before it starts, then purges what is left into a run of its
  own: across all runs every purged letter appears exactly once;
- the ledger row is committed before its run stores a part, so every part has a ledger, and only
  runs named by this database's ledger are ever cut.

The parts of a run, concatenated in order, are one valid gzip file (`read_purge_file` reads them);
`manage.py restore_purge` loads them back, each checked against its sha256 first
(deadletters/services/restore.py).
"""

import gzip
import hashlib
import json
import logging
import os
import time
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, storages
from django.db import connection, models, transaction
from django.db.models import F, Q
from django.utils import timezone

from deadletters.audit import record_audit
from deadletters.models import AuditEntry, DeadLetter, DeadLetterStatus
from deadletters.services.archive import (
    ACTOR,
    Progress,
    RunResult,
    dry_run_groups,
    keyset_of,
    mark_complete,
    refresh_planner_statistics,
)
from reports.models import ReportTask

logger = logging.getLogger(__name__)

# zlib level 1: five times faster than the default 6 on these rows for a file about 1.4x larger
# (bench/README.md, "purge profile"); the file is written once and rarely read.
GZIP_LEVEL = 1
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%f+00:00"
_PG_TIME_FORMAT = 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'
COLUMNS = (
    "archived_at",
    "attempts",
    "created_at",
    "discarded_at",
    "error_message",
    "error_type",
    "expire_at",
    "fingerprint",
    "id",
    "kind",
    "params",
    "replayed_at",
    "replayed_by",
    "status",
    "task_id",
    "traceback",
)
TIME_COLUMNS = {"archived_at", "created_at", "discarded_at", "expire_at", "replayed_at"}


def purge_run_name(now: datetime) -> str:
    return f"deadletters-{now:%Y%m%dT%H%M%S%fZ}-{os.getpid()}"


def part_name(run: str, number: int) -> str:
    return f"{run}/part-{number:06d}.jsonl.gz"


def archive_storage():
    return storages["archive"]


def _store_part(name: str, data: bytes) -> None:
    """Store one part whole under its final name, durable before the batch commits."""
    storage = archive_storage()
    saved = storage.save(name, ContentFile(data))
    if saved != name:  # a stray part the repair should have cut: never leave two copies
        storage.delete(saved)
        raise RuntimeError(f"purge part {name} already exists in the archive storage")
    if isinstance(storage, FileSystemStorage):
        path = Path(storage.path(name))
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
        _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- reading a batch ------------------------------------------------------------------


def purge_batch_statement(*, cutoff: datetime, after: tuple | None, batch_size: int) -> tuple[str, list]:
    """A purge batch's first statement (also what tests EXPLAIN). PostgreSQL: one DELETE ...
    RETURNING the rows as JSON lines, of the next batch_size due rows locked in (archived_at, id)
    order with SKIP LOCKED. Elsewhere: the SELECT of those rows (deleted by id next)."""
    qn = connection.ops.quote_name
    letters, tasks = qn(DeadLetter._meta.db_table), qn(ReportTask._meta.db_table)

    def due(alias: str) -> str:
        status, archived_at, pk = (f"{alias}{qn(c)}" for c in ("status", "archived_at", "id"))
        after_sql = f" AND ({archived_at}, {pk}) > (%s, %s)" if after is not None else ""
        return (
            f"{status} = '{DeadLetterStatus.ARCHIVED}' AND {archived_at} <= %s{after_sql} "
            f"ORDER BY {archived_at}, {pk} LIMIT {int(batch_size)}"
        )

    params = [connection.ops.adapt_datetimefield_value(cutoff), *(after or ())]
    if connection.vendor == "postgresql":

        def value(column):
            ref = f"d.{qn(column)}"
            return (
                f"to_char({ref} AT TIME ZONE 'UTC', '{_PG_TIME_FORMAT}')" if column in TIME_COLUMNS else ref
            )

        pairs = [f"'{c}', {value(c)}" for c in COLUMNS] + ["'task_public_id', t.public_id"]
        sql = (
            f"DELETE FROM {letters} d USING {tasks} t WHERE t.{qn('id')} = d.{qn('task_id')} "
            f"AND d.{qn('id')} = ANY(ARRAY(SELECT {qn('id')} FROM {letters} WHERE {due('')} "
            "FOR UPDATE SKIP LOCKED)) "
            f"RETURNING d.{qn('archived_at')}, d.{qn('id')}, json_build_object({', '.join(pairs)})::text"
        )
        return sql, params
    columns = ", ".join(f"d.{qn(c)}" for c in COLUMNS)
    sql = (
        f"SELECT d.{qn('archived_at')}, d.{qn('id')}, {columns}, t.public_id FROM {letters} d "
        f"JOIN {tasks} t ON t.{qn('id')} = d.{qn('task_id')} WHERE {due('d.')}"
    )
    return sql, params


def _python_line(row: tuple) -> str:
    """The JSON line of a row read without PostgreSQL's help: same keys, same time format."""
    data = dict(zip(COLUMNS, row[: len(COLUMNS)], strict=True))
    for column in TIME_COLUMNS:
        data[column] = _format_time(data[column])
    if isinstance(data["params"], str):  # SQLite hands JSON columns back as text
        data["params"] = json.loads(data["params"])
    public_id = row[len(COLUMNS)]
    data["task_public_id"] = str(ReportTask._meta.get_field("public_id").to_python(public_id))
    return json.dumps(data, ensure_ascii=False, sort_keys=True)


def _format_time(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)  # stored in UTC
    return value.astimezone(UTC).strftime(_TIME_FORMAT)


# --- what references a letter -----------------------------------------------------------


def _release_references(ids: list[int]) -> None:
    """What the ORM's delete would do to rows pointing at these letters, in one statement each:
    CASCADE rows are deleted, SET_NULL links cleared (audit entries keep their text)."""
    for relation in DeadLetter._meta.related_objects:
        if not relation.field.concrete or relation.remote_field is None:
            continue
        on_delete = relation.on_delete
        rows = relation.related_model._base_manager.filter(**{f"{relation.field.name}__in": ids})
        if on_delete is models.CASCADE:
            rows.delete()
        elif on_delete is models.SET_NULL:
            rows.update(**{relation.field.name: None})


# --- the ledger and the repair of killed runs ------------------------------------------------


def repair_killed_runs() -> list[dict]:
    """Delete the parts of every purge run that was killed past the count its ledger committed
    (their rows were never deleted: they are still in the table and will be purged again).
    Call under archive_lock. Returns what was done, for the log."""
    repaired = []
    for entry in AuditEntry.objects.filter(action="purge", actor=ACTOR).order_by("pk"):
        details = entry.details or {}
        if details.get("complete") or details.get("repaired"):
            continue
        if "parts" in details:
            cut = _cut_parts(details["file"], int(details["parts"]))
        elif "file_bytes" in details:  # a run of the release that appended to one local file
            cut = _cut_local_file(Path(details["file"]), int(details["file_bytes"]))
        else:
            continue
        if cut is None:
            continue
        AuditEntry.objects.filter(pk=entry.pk).update(
            details={**details, "repaired": {"at": timezone.now().isoformat(), "cut": cut}}
        )
        repaired.append({"file": details["file"], "cut": cut, "rows": entry.item_count})
        logger.warning("purge run %s was killed: %s cut from %s", entry.pk, cut, details["file"])
    return repaired


def _cut_parts(run: str, committed: int) -> int:
    storage = archive_storage()
    try:
        _, names = storage.listdir(run)
    except FileNotFoundError:
        names = []
    numbers = sorted(int(name[5:11]) for name in names if name.startswith("part-"))
    if len([n for n in numbers if n <= committed]) < committed:
        logger.error("purge run %s has fewer parts than its ledger says (%s < %s)", run, len(numbers),
                     committed)
    cut = [n for n in numbers if n > committed]
    for number in cut:
        storage.delete(part_name(run, number))
    return len(cut)


def _cut_local_file(path: Path, committed: int) -> int | None:
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size < committed:
        logger.error("purge file %s is shorter than its ledger says (%s < %s)", path, size, committed)
        return None
    if committed == 0:
        path.unlink()
        _fsync_dir(path.parent)
    elif size > committed:
        with open(path, "r+b") as handle:
            handle.truncate(committed)
            handle.flush()
            os.fsync(handle.fileno())
    return size - committed


def _open_ledger(run: str, cutoff: datetime) -> AuditEntry:
    # Committed before the run stores a part: a part without a ledger never happens.
    return record_audit(
        action="purge",
        actor=ACTOR,
        source="cron",
        item_count=0,
        details={"cutoff": cutoff.isoformat(), "file": run, "parts": 0, "sha256": [], "complete": False},
    )


# --- the purge ----------------------------------------------------------------------------


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
    export in the archive storage (one run of gzip JSON-lines parts, created only if a row is purged)."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if older_than_days < 0:
        raise ValueError("older_than_days must not be negative")
    now = now or timezone.now()
    cutoff = now - timedelta(days=older_than_days)
    due = Q(status=DeadLetterStatus.ARCHIVED, archived_at__lte=cutoff)
    result = RunResult(cutoff=cutoff, basis="archived_at", dry_run=dry_run)
    if dry_run:
        result.groups = dry_run_groups(DeadLetter.objects.filter(due))
        result.count = sum(group["n"] for group in result.groups)
        return result
    repair_killed_runs()
    if not DeadLetter.objects.filter(due).exists():
        return result
    refresh_planner_statistics()

    result.file = purge_run_name(now)
    ledger = _open_ledger(result.file, cutoff)
    details = dict(ledger.details)
    after = None
    while True:
        part = part_name(result.file, details["parts"] + 1)
        with transaction.atomic():
            deleted, after, digest = _purge_batch(part, cutoff=cutoff, after=after, batch_size=batch_size)
            if deleted:
                details["parts"] += 1
                details["sha256"].append(digest)  # the ledger's copy: a restore checks each part against it
                AuditEntry.objects.filter(pk=ledger.pk).update(item_count=F("item_count") + deleted,
                                                               details=details)
        if not deleted:
            break
        result.count += deleted
        result.batches += 1
        if progress:
            progress("purge", result.batches, deleted, result.count)
        if pause_seconds:
            time.sleep(pause_seconds)
    if result.count == 0:
        # Restored or replayed between the check and the first batch: no part was stored.
        result.file = None
    mark_complete(ledger.pk, batches=result.batches)
    return result


def _purge_batch(
    part: str, *, cutoff: datetime, after: tuple | None, batch_size: int
) -> tuple[int, tuple | None, str | None]:
    """Inside a transaction: lock and read the next batch, release what references it, delete it,
    store it as the part named `part` (one gzip member). Returns (rows, keyset of the last row, the
    stored part's sha256)."""
    sql, params = purge_batch_statement(cutoff=cutoff, after=after, batch_size=batch_size)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not rows:
        return 0, after, None
    postgres = connection.vendor == "postgresql"
    rows.sort(key=lambda row: row[:2])  # RETURNING keeps no order
    ids = [row[1] for row in rows]
    # PostgreSQL checks foreign keys at commit (Django makes them deferred): the letters may go
    # first and what pointed at them right after, in the same transaction.
    _release_references(ids)
    if not postgres:
        # Under SQLite's write lock since the transaction began: exactly the rows read go.
        qn = connection.ops.quote_name
        with connection.cursor() as cursor:
            placeholders = ", ".join(["%s"] * len(ids))
            cursor.execute(
                f"DELETE FROM {qn(DeadLetter._meta.db_table)} WHERE {qn('id')} IN ({placeholders})", ids
            )
            if cursor.rowcount != len(ids):
                raise RuntimeError(f"purge batch deleted {cursor.rowcount} rows, expected {len(ids)}")
    text = "\n".join(row[2] if postgres else _python_line(row[2:]) for row in rows) + "\n"
    data = gzip_member(text.encode())
    _store_part(part, data)
    return len(rows), keyset_of(rows[-1][:2]), hashlib.sha256(data).hexdigest()


def gzip_member(data: bytes) -> bytes:
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # wbits 31: a gzip member
    return compressor.compress(data) + compressor.flush()


def read_purge_file(run: str) -> list[dict]:
    """Every row of a purge run (every part, in order), for tests and tools."""
    storage = archive_storage()
    _, names = storage.listdir(run)
    rows = []
    for name in sorted(names):
        with (storage.open(f"{run}/{name}", "rb") as stored,
              gzip.open(stored, "rt", encoding="utf-8") as handle):
            rows += [json.loads(line) for line in handle]
    return rows
