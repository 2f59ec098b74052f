"""The landed (pre-issue-13) algorithms, kept only so a benchmark can measure its baseline in the
same run, on the same data and machine. Not used by the application.

- `replay_letter_by_letter`: what the bulk runner did per batch (each letter through
  replay_dead_letter in a savepoint: ~15 statements and one enqueue a letter).
- `archive_batch_select`: the landed archiver's batch SELECT (ORDER BY expire_at, id over the old
  (status, expire_at) index), timed inside a rolled-back transaction that swaps the indexes back.
- `purge_batches`: the landed purge (values() + DjangoJSONEncoder + gzip level 6 per batch, then
  the ORM's delete collecting alerts and audit entries).
"""

import json
import os
import time
import zlib
from datetime import datetime

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.db.models import Q


def replay_letter_by_letter(bulk, ids: list[int]) -> float:
    from deadletters.services.replay import replay_dead_letter
    from reports.services import TaskNotReplayable

    start = time.perf_counter()
    with transaction.atomic():
        for pk in ids:
            try:
                with transaction.atomic():
                    replay_dead_letter(dead_letter_id=pk, actor=bulk.actor, ip_address=None, bulk=bulk)
            except TaskNotReplayable:
                pass
    return time.perf_counter() - start


def archive_batch_select(cutoff: datetime, batches: int = 3) -> list[float]:
    """Seconds per landed batch SELECT at the current table size (PostgreSQL; needs the walk
    index dropped and the old one back, both undone by the rollback)."""
    times = []
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX dl_open_expire_id")
            cursor.execute("CREATE INDEX dl_status_expire ON deadletters_deadletter (status, expire_at)")
            cursor.execute("ANALYZE deadletters_deadletter")
            floor = None
            for _ in range(batches):
                sql = (
                    "SELECT id, expire_at FROM deadletters_deadletter WHERE status = 'open' AND expire_at <= %s"
                    + (" AND expire_at >= %s" if floor else "")
                    + " ORDER BY expire_at, id LIMIT 1000"
                )
                start = time.perf_counter()
                cursor.execute(sql, [cutoff, floor] if floor else [cutoff])
                rows = cursor.fetchall()
                times.append(time.perf_counter() - start)
                floor = rows[-1][1]
        transaction.set_rollback(True)
    return times


PURGE_FIELDS = (
    "id", "task_id", "task__public_id", "kind", "params", "error_type", "error_message", "traceback",
    "attempts", "fingerprint", "status", "created_at", "expire_at", "replayed_at", "replayed_by",
    "archived_at", "discarded_at",
)


def purge_batches(path, cutoff: datetime, *, batch_size: int = 1000, limit: int) -> tuple[int, float]:
    """The landed purge over at most `limit` rows; returns (rows, seconds)."""
    from deadletters.models import DeadLetter, DeadLetterStatus

    due = Q(status=DeadLetterStatus.ARCHIVED, archived_at__lte=cutoff)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
    done, last_id = 0, 0
    start = time.perf_counter()
    try:
        while done < limit:
            ids = list(DeadLetter.objects.filter(due, pk__gt=last_id).order_by("id").values_list("id", flat=True)[:batch_size])
            if not ids:
                break
            last_id = ids[-1]
            with transaction.atomic():
                rows = DeadLetter.objects.filter(due, pk__in=ids).order_by("id").select_for_update(of=("self",))
                compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
                written = []
                for row in rows.values(*PURGE_FIELDS).iterator(chunk_size=100):
                    row["task_public_id"] = row.pop("task__public_id")
                    line = json.dumps(row, cls=DjangoJSONEncoder, ensure_ascii=False, sort_keys=True) + "\n"
                    os.write(fd, compressor.compress(line.encode()))
                    written.append(row["id"])
                os.write(fd, compressor.flush())
                os.fsync(fd)
                DeadLetter.objects.filter(pk__in=written).only("id").delete()
                done += len(written)
    finally:
        os.close(fd)
    return done, time.perf_counter() - start
