"""Restore a purge: load the parts of a purge run (deadletters/services/purge.py) back into the
table as archived dead letters.

- A part is checked whole before anything of it is loaded: against the sha256 the purge ledger
  recorded for it (runs purged by earlier releases have none: their parts may unpack to at most
  UNCHECKED_RATIO times their size, so a gzip bomb is refused), then gzip's own CRC and length,
  UTF-8, one JSON object per line, every column present with its type. A missing or damaged part is
  reported and skipped; the other parts are restored and the run ends with an error naming it.
- One transaction per part: a part is restored whole or not at all.
- Idempotent: a letter keeps its id, and a letter whose id is already in the table (same task,
  cause and time of death) is counted as present and left alone, so a second run restores nothing
  twice. A different letter holding that id (a restore into another database) is a conflict: left
  alone, reported, and the run ends with an error.
- A restored letter is `archived` with every exported column as it was, except archived_at: the
  time of the restore, so the next purge does not take it again before the retention passes. The
  original archived_at stays in the export.
- The task: the letter is linked to its task by the task's public id. A task row that is gone is
  made again as a dead task (kind, params and attempts from the newest of its restored letters, no
  client, `submitted_by` "restore_purge"), under its old id when that is free, so the letter can be
  opened, replayed and searched by task id as before.
- Audited: one entry (action `restore_purge`) with the actor, the run, and the counts, updated in
  each part's transaction (a killed restore leaves an entry with what it did, `complete` false).
"""

import gzip
import hashlib
import io
import json
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from deadletters.audit import record_audit
from deadletters.models import AuditEntry, DeadLetter, DeadLetterStatus
from deadletters.services.archive import ACTOR as PURGE_ACTOR
from deadletters.services.purge import COLUMNS, TIME_COLUMNS, archive_storage, part_name
from reports.kinds import KINDS
from reports.models import Priority, ReportTask, TaskStatus

ACTION = "restore_purge"
LOOKUP_CHUNK = 500
_STRINGS = {"kind": 64, "error_type": 200, "fingerprint": 40, "replayed_by": 150, "error_message": None,
            "traceback": None}
_REQUIRED_TIMES = {"created_at", "expire_at", "archived_at"}
UNCHECKED_RATIO, UNCHECKED_FLOOR = 100, 64 * 1024 * 1024  # a part without a sha256: its text at most

Progress = Callable[["RestoreResult", "PartReport"], None]


class RestoreError(Exception):
    """The run cannot be restored at all (no such run, a run of an earlier format)."""


class BadPart(Exception):
    """A part that is missing or fails a check: nothing of it is loaded."""


@dataclass
class PartReport:
    number: int
    name: str
    letters: int = 0
    restored: int = 0
    present: int = 0
    conflicts: int = 0
    tasks_made: int = 0
    error: str = ""


@dataclass
class RestoreResult:
    run: str
    dry_run: bool
    parts: int = 0  # in the run, as its ledger committed them
    parts_done: int = 0  # checked (and, unless a dry run, loaded)
    restored: int = 0  # letters written back (a dry run: that would be)
    present: int = 0  # already in the table: left alone
    conflicts: int = 0  # their id is held by a different letter: left alone
    tasks_made: int = 0  # task rows made again for letters whose task was gone
    checksums: bool = False  # the ledger recorded a sha256 per part
    bad_parts: list[PartReport] = field(default_factory=list)
    audit_id: int | None = None

    @property
    def ok(self) -> bool:
        return not self.bad_parts and not self.conflicts


def purge_ledger(run: str) -> AuditEntry:
    entries = list(AuditEntry.objects.filter(action="purge", actor=PURGE_ACTOR, details__file=run)[:2])
    if not entries:
        raise RestoreError(f"no purge run named {run!r} in this database's audit log")
    if len(entries) > 1:
        raise RestoreError(f"more than one purge ledger names {run!r}")
    entry = entries[0]
    if "parts" not in entry.details:
        raise RestoreError(
            f"purge run {run!r} was written by an earlier release as one file; "
            "only runs of parts can be restored"
        )
    return entry


def restore_purge(
    *, run: str, actor: str, dry_run: bool = False, progress: Progress | None = None
) -> RestoreResult:
    """Check and load every part of `run`, in order. Raises RestoreError when the run cannot be
    restored at all; a bad part is in `result.bad_parts` and the other parts are restored."""
    ledger = purge_ledger(run)
    checksums = ledger.details.get("sha256") or []
    result = RestoreResult(run=run, dry_run=dry_run, parts=int(ledger.details["parts"]),
                           checksums=bool(checksums))
    if not dry_run:
        result.audit_id = record_audit(
            action=ACTION, actor=actor, source="cli", item_count=0, details=_audit_details(result, ledger)
        ).pk
    for number in range(1, result.parts + 1):
        report = PartReport(number=number, name=part_name(run, number))
        expected = checksums[number - 1] if number <= len(checksums) else None
        try:
            letters = read_part(report.name, sha256=expected)
        except BadPart as exc:
            report.error = str(exc)
            result.bad_parts.append(report)
        else:
            report.letters = len(letters)
            if dry_run:
                _count_part(letters, report)
                _add(result, report)
            else:
                with transaction.atomic():
                    _load_part(letters, report)
                    _add(result, report)
                    AuditEntry.objects.filter(pk=result.audit_id).update(
                        item_count=result.restored, details=_audit_details(result, ledger)
                    )
        if progress:
            progress(result, report)
    if not dry_run:
        AuditEntry.objects.filter(pk=result.audit_id).update(
            item_count=result.restored, details={**_audit_details(result, ledger), "complete": True}
        )
    return result


def _add(result: RestoreResult, report: PartReport) -> None:
    result.parts_done += 1
    result.restored += report.restored
    result.present += report.present
    result.conflicts += report.conflicts
    result.tasks_made += report.tasks_made


def _audit_details(result: RestoreResult, ledger: AuditEntry) -> dict:
    return {
        "run": result.run,
        "purge_ledger": ledger.pk,
        "parts": result.parts,
        "parts_done": result.parts_done,
        "restored": result.restored,
        "present": result.present,
        "conflicts": result.conflicts,
        "tasks_made": result.tasks_made,
        "bad_parts": [{"part": r.name, "error": r.error} for r in result.bad_parts],
        "checksums": result.checksums,
        "complete": False,
    }


# --- checking a part ----------------------------------------------------------------------------


def read_part(name: str, *, sha256: str | None) -> list[dict]:
    """The letters of one stored part, every check passed, or BadPart saying which failed."""
    storage = archive_storage()
    try:
        if not storage.exists(name):
            raise BadPart(f"{name} is missing from the archive storage")
        with storage.open(name, "rb") as stored:
            data = stored.read()
    except BadPart:
        raise
    except Exception as exc:  # noqa: BLE001 - any storage failure is this part's failure
        raise BadPart(f"{name} cannot be read: {exc}") from None
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise BadPart(f"{name} does not match the sha256 its purge recorded (changed or damaged)")
    limit = None if sha256 else max(UNCHECKED_FLOOR, UNCHECKED_RATIO * len(data))
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as unzipped:  # checks each member's CRC-32 and length
            raw = unzipped.read(-1 if limit is None else limit + 1)
        if limit is not None and len(raw) > limit:
            raise BadPart(f"{name} unpacks to more than {UNCHECKED_RATIO} times its size (no sha256)")
        text = raw.decode("utf-8")
    except (OSError, EOFError, zlib.error) as exc:
        raise BadPart(f"{name} is not intact gzip: {exc}") from None
    except UnicodeDecodeError as exc:
        raise BadPart(f"{name} is not UTF-8 text: {exc}") from None
    if not text.endswith("\n"):
        raise BadPart(f"{name} ends in the middle of a line")
    letters, ids, tasks = [], set(), {}
    for line_number, line in enumerate(text[:-1].split("\n"), start=1):
        where = f"{name} line {line_number}"
        letter = parse_line(line, where=where)
        if letter["id"] in ids:
            raise BadPart(f"{where}: dead letter {letter['id']} appears twice")
        if tasks.setdefault(letter["task_public_id"], letter["task_id"]) != letter["task_id"]:
            raise BadPart(f"{where}: task {letter['task_public_id']} has two ids in this part")
        ids.add(letter["id"])
        letters.append(letter)
    if len(set(tasks.values())) != len(tasks):
        raise BadPart(f"{name}: one task id stands for two tasks")
    if not letters:
        raise BadPart(f"{name} holds no dead letter")
    return letters


def parse_line(line: str, *, where: str) -> dict:
    """One exported letter, its fields checked and its times parsed, or BadPart."""
    try:
        row = json.loads(line)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than Python's stack
        raise BadPart(f"{where}: not JSON ({exc})") from None
    if not isinstance(row, dict):
        raise BadPart(f"{where}: not a JSON object")
    missing = [column for column in (*COLUMNS, "task_public_id") if column not in row]
    if missing:
        raise BadPart(f"{where}: missing {', '.join(missing)}")
    for column in ("id", "task_id", "attempts"):
        lowest = 0 if column == "attempts" else 1
        if type(row[column]) is not int or row[column] < lowest:
            raise BadPart(f"{where}: {column} must be a whole number of at least {lowest}")
    for column, limit in _STRINGS.items():
        value = row[column]
        if not isinstance(value, str) or "\x00" in value or (limit and len(value) > limit):
            raise BadPart(
                f"{where}: {column} must be text{f' of at most {limit} characters' if limit else ''}")
    if not isinstance(row["params"], dict):
        raise BadPart(f"{where}: params must be a JSON object")
    if row["status"] != DeadLetterStatus.ARCHIVED:
        raise BadPart(
            f"{where}: status is {str(row['status'])[:20]!r}; a purge exports archived letters only")
    for column in TIME_COLUMNS:
        row[column] = _time(row[column], required=column in _REQUIRED_TIMES, where=f"{where}: {column}")
    try:
        row["task_public_id"] = uuid.UUID(str(row["task_public_id"]))
    except ValueError:
        raise BadPart(f"{where}: task_public_id is not a UUID") from None
    return row


def _time(value, *, required: bool, where: str) -> datetime | None:
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise BadPart(f"{where} must be a time")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise BadPart(f"{where} is not a time: {value[:40]!r}") from None
    if moment.tzinfo is None:
        raise BadPart(f"{where} has no time zone")
    return moment


# --- loading a part -----------------------------------------------------------------------------


def _chunks(values: list, size: int = LOOKUP_CHUNK):
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _triage(letters: list[dict], report: PartReport) -> list[dict]:
    """The letters to write: not present by their id; present ones and conflicts are counted."""
    found = {}
    for ids in _chunks([letter["id"] for letter in letters]):
        for row in DeadLetter.objects.filter(pk__in=ids).values("id", "fingerprint", "created_at",
                                                                 "task__public_id"):
            found[row["id"]] = row
    fresh = []
    for letter in letters:
        row = found.get(letter["id"])
        if row is None:
            fresh.append(letter)
        elif (row["fingerprint"], row["created_at"], row["task__public_id"]) == (
            letter["fingerprint"],
            letter["created_at"],
            letter["task_public_id"],
        ):
            report.present += 1
        else:
            report.conflicts += 1
    return fresh


def _count_part(letters: list[dict], report: PartReport) -> None:
    fresh = _triage(letters, report)
    report.restored = len(fresh)
    report.tasks_made = len(_missing_tasks(fresh)[0])


def _missing_tasks(letters: list[dict]) -> tuple[dict[uuid.UUID, dict], dict[uuid.UUID, int]]:
    """(the newest letter of each task that is gone, keyed by public id; the task ids found)."""
    wanted = sorted({letter["task_public_id"] for letter in letters})
    found: dict[uuid.UUID, int] = {}
    for public_ids in _chunks(wanted):
        found.update(ReportTask.objects.filter(public_id__in=public_ids).values_list("public_id", "id"))
    missing: dict[uuid.UUID, dict] = {}
    for letter in letters:
        key = letter["task_public_id"]
        if key not in found and (key not in missing or letter["created_at"] > missing[key]["created_at"]):
            missing[key] = letter
    return missing, found


def _load_part(letters: list[dict], report: PartReport) -> None:
    """Inside the part's transaction: write the letters that are not present, and the tasks that are gone."""
    fresh = _triage(letters, report)
    if not fresh:
        return
    missing, task_ids = _missing_tasks(fresh)
    if missing:
        task_ids.update(_make_tasks(missing, fresh))
        report.tasks_made = len(missing)
    now = timezone.now()
    DeadLetter.objects.bulk_create(
        (
            DeadLetter(
                id=letter["id"],
                task_id=task_ids[letter["task_public_id"]],
                **{column: letter[column]
                   for column in COLUMNS if column not in ("id", "task_id", "archived_at")},
                archived_at=now,
            )
            for letter in fresh
        ),
        batch_size=LOOKUP_CHUNK,
    )
    report.restored = len(fresh)
    _sequence_past_max(DeadLetter)


def _make_tasks(missing: dict[uuid.UUID, dict], letters: list[dict]) -> dict[uuid.UUID, int]:
    """A dead task per public id that is gone, under its old id when no row holds it."""
    first_death: dict[uuid.UUID, datetime] = {}
    for letter in letters:
        key = letter["task_public_id"]
        first_death[key] = min(first_death.get(key, letter["created_at"]), letter["created_at"])
    old_ids = [letter["task_id"] for letter in missing.values()]
    taken = set()
    for ids in _chunks(old_ids):
        taken.update(ReportTask.objects.filter(pk__in=ids).values_list("id", flat=True))
    made = {}
    for public_id, letter in missing.items():
        kind = KINDS.get(letter["kind"])
        task = ReportTask.objects.create(
            id=None if letter["task_id"] in taken else letter["task_id"],
            public_id=public_id,
            kind=letter["kind"],
            params=letter["params"],
            priority=settings.REPORT_KIND_PRIORITIES.get(
                letter["kind"], kind.default_priority if kind else Priority.DEFAULT),
            status=TaskStatus.DEAD,
            attempt=letter["attempts"],
            max_attempts=max(letter["attempts"], 1),
            timeout_seconds=settings.REPORT_JOB_TIMEOUT,
            submitted_by=ACTION,
            last_error=f"{letter['error_type']}: {letter['error_message']}"[:10_000],
            finished_at=letter["created_at"],
        )
        # created_at is set on insert (auto_now_add): put back when the task was known to exist.
        ReportTask.objects.filter(pk=task.pk).update(created_at=first_death[public_id])
        made[public_id] = task.pk
    _sequence_past_max(ReportTask)
    return made


def _sequence_past_max(model) -> None:
    """PostgreSQL: rows written with their old ids leave the id sequence where it was; move it past
    the highest id (never back), so the next row the application writes cannot collide. SQLite's
    AUTOINCREMENT counter follows explicit ids by itself."""
    if connection.vendor != "postgresql":
        return
    table = model._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence(%s, 'id'), GREATEST("
            f"(SELECT COALESCE(MAX(id), 0) FROM {connection.ops.quote_name(table)}), "
            "nextval(pg_get_serial_sequence(%s, 'id'))))",
            [table, table],
        )
