"""Where a purge's time goes (PostgreSQL), per component, on N archived letters, nothing deleted
for good (each delete is rolled back):

  read     the landed way (ORM values() of every column, DjangoJSONEncoder) vs the purge's own
           DELETE ... RETURNING JSON lines built by PostgreSQL (json_build_object), rolled back
  gzip     zlib level 6 (the landed default) vs level 1 on the same lines
  fsync    one per batch of 1,000 / 5,000 vs one per file
  delete   the ORM's delete (collects alerts and audit entries) vs one DELETE per referencing
           table and one of the letters
"""

import json
import os
import tempfile
import time
import zlib
from datetime import timedelta

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone

from bench import _common


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def run(n: int) -> None:
    from bench.baselines_bulk import PURGE_FIELDS
    from deadletters.models import DeadLetter, DeadLetterStatus
    from deadletters.services.purge import _release_references, purge_batch_statement

    if connection.vendor != "postgresql":
        print("purge profile: PostgreSQL only")
        return
    DeadLetter.objects.exclude(status=DeadLetterStatus.DISCARDED).update(status=DeadLetterStatus.DISCARDED)
    _common.insert_dead_letters(n, task_ids=_common.make_dead_tasks(1000), expired=True)
    archived_at = timezone.now() - timedelta(days=40)
    DeadLetter.objects.filter(status=DeadLetterStatus.OPEN).update(status=DeadLetterStatus.ARCHIVED, archived_at=archived_at)
    cutoff = timezone.now() - timedelta(days=30)
    print(f"purge profile on {n} archived letters ({_common.conditions()})")

    def orm_read():
        lines = []
        rows = DeadLetter.objects.filter(status=DeadLetterStatus.ARCHIVED).order_by("id").values(*PURGE_FIELDS)
        for row in rows.iterator(chunk_size=2000):
            row["task_public_id"] = row.pop("task__public_id")
            lines.append(json.dumps(row, cls=DjangoJSONEncoder, ensure_ascii=False, sort_keys=True))
        return lines

    def pg_read():
        # The purge's own statement (a DELETE ... RETURNING on PostgreSQL), rolled back.
        sql, params = purge_batch_statement(cutoff=cutoff, after=None, batch_size=n)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, params)
            lines = [row[2] for row in cursor.fetchall()]
            transaction.set_rollback(True)
        return lines

    orm_seconds, _ = timed(orm_read)
    pg_seconds, lines = timed(pg_read)
    text = ("\n".join(lines) + "\n").encode()
    print(f"  read+encode: ORM values() + DjangoJSONEncoder {orm_seconds:.2f}s; DELETE ... RETURNING JSON built by "
          f"PostgreSQL (rolled back) {pg_seconds:.2f}s ({len(text) / 1e6:.0f} MB of JSON lines)")
    for level in (6, 1):
        seconds, packed = timed(lambda level=level: zlib.compressobj(level, zlib.DEFLATED, 31).compress(text))
        print(f"  gzip level {level}: {seconds:.2f}s, {len(text) / max(len(packed), 1):.1f}x smaller")
    os.makedirs(os.environ["ARCHIVE_DIR"], exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.environ["ARCHIVE_DIR"]) as tmp:
        chunk = zlib.compress(text[: len(text) // 1000], 1)
        for per in (1000, 5000, n):
            path = os.path.join(tmp, f"f{per}")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT)
            start = time.perf_counter()
            for i in range(1000):
                os.write(fd, chunk)
                if (i + 1) % max(1, per * 1000 // n) == 0:
                    os.fsync(fd)
            os.fsync(fd)
            os.close(fd)
            print(f"  write {len(chunk) * 1000 / 1e6:.0f} MB with an fsync every {per} rows: {time.perf_counter() - start:.2f}s")
    ids = list(DeadLetter.objects.filter(status=DeadLetterStatus.ARCHIVED).order_by("id").values_list("id", flat=True)[:5000])
    assert len(ids) == 5000, "the read above must not have deleted anything"

    def orm_delete():
        with transaction.atomic():
            DeadLetter.objects.filter(pk__in=ids).only("id").delete()
            transaction.set_rollback(True)

    def raw_delete():
        with transaction.atomic():
            _release_references(ids)
            with connection.cursor() as cursor:
                cursor.execute("DELETE FROM deadletters_deadletter WHERE id = ANY(%s)", [ids])
            transaction.set_rollback(True)

    orm, _ = timed(orm_delete)
    raw, _ = timed(raw_delete)
    print(f"  delete 5000 letters with what references them: ORM collector {orm:.2f}s; one DELETE per "
          f"referencing table and one of the letters {raw:.2f}s")
    DeadLetter.objects.filter(status=DeadLetterStatus.ARCHIVED).update(status=DeadLetterStatus.DISCARDED)
