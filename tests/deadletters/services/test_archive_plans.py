"""The archiver and the purge walk an index: each batch reads batch_size rows from the (basis, id)
index of the rows in that state, never a sort of everything that is due, even when every row shares
one expire_at. PostgreSQL: EXPLAIN (the planner's choice on analysed data); SQLite: EXPLAIN QUERY
PLAN of the very same statements. A letter an operator holds locked is skipped, not waited for."""

import json
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from deadletters.models import DeadLetter, DeadLetterStatus
from deadletters.services.archive import archive_batch_statement, archive_expired_dead_letters
from deadletters.services.purge import purge_batch_statement
from reports.models import ReportTask, TaskStatus

ROWS = 10_000


def letters_sharing_one_expiry(n: int, *, status=DeadLetterStatus.OPEN, **fields) -> None:
    task = ReportTask.objects.create(
        kind="probe", status=TaskStatus.DEAD, attempt=3, max_attempts=3, timeout_seconds=9
    )
    moment = timezone.now() - timedelta(days=40)
    DeadLetter.objects.bulk_create(
        (
            DeadLetter(
                task=task,
                kind="probe",
                error_type="E",
                error_message=f"boom {i}",
                attempts=3,
                fingerprint="f" * 40,
                status=status,
                created_at=moment,
                expire_at=moment + timedelta(days=7),
                **fields,
            )
            for i in range(n)
        ),
        batch_size=2000,
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {DeadLetter._meta.db_table}")


def plan(sql: str, params: list) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
            return json.dumps(cursor.fetchone()[0])
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


def walk_keyset() -> tuple:
    """A keyset from the middle of the walk, as the second and later batches use."""
    row = DeadLetter.objects.order_by("expire_at", "id").values_list("expire_at", "id")[ROWS // 2]
    return (connection.ops.adapt_datetimefield_value(row[0]), row[1])


@pytest.mark.django_db
@pytest.mark.parametrize("after", [False, True], ids=["first batch", "later batch"])
def test_an_archive_batch_is_an_index_range_scan_when_every_row_shares_one_expiry(after):
    letters_sharing_one_expiry(ROWS)
    sql, params = archive_batch_statement(
        basis="expire_at",
        cutoff=timezone.now(),
        after=walk_keyset() if after else None,
        batch_size=1000,
        now=timezone.now(),
    )

    shown = plan(sql, params)

    if connection.vendor == "postgresql":
        assert '"Index Name": "dl_open_expire_id"' in shown, shown
        assert '"Node Type": "Sort"' not in shown and '"Seq Scan"' not in shown, shown
        assert '"Index Name": "deadletters_deadletter_pkey"' in shown, shown  # the UPDATE by id
        if after:
            assert "ROW(expire_at, id) >" in shown or "(expire_at, id) >" in shown, shown
    else:
        assert "dl_open_expire_id" in shown, shown
        assert "TEMP B-TREE" not in shown, shown  # no sort: the index gives the order


@pytest.mark.django_db
@pytest.mark.parametrize("after", [False, True], ids=["first batch", "later batch"])
def test_a_purge_batch_is_an_index_range_scan(after):
    archived_at = timezone.now() - timedelta(days=40)
    letters_sharing_one_expiry(ROWS, status=DeadLetterStatus.ARCHIVED, archived_at=archived_at)
    keyset = None
    if after:
        pk = DeadLetter.objects.order_by("id").values_list("id", flat=True)[ROWS // 2]
        keyset = (connection.ops.adapt_datetimefield_value(archived_at), pk)
    sql, params = purge_batch_statement(
        cutoff=timezone.now() - timedelta(days=30), after=keyset, batch_size=1000
    )

    shown = plan(sql, params)

    if connection.vendor == "postgresql":
        assert '"Index Name": "dl_archived_at_id"' in shown, shown
        assert '"Node Type": "Sort"' not in shown, shown
        scans = [node for node in shown.split('"Node Type": ')[1:] if node.startswith('"Seq Scan"')]
        assert not [scan for scan in scans if '"Relation Name": "deadletters_deadletter"' in scan], shown
    else:
        assert "dl_archived_at_id" in shown, shown
        assert "TEMP B-TREE" not in shown, shown


@pytest.mark.django_db(transaction=True)
def test_the_archiver_does_not_wait_for_a_letter_an_operator_holds():
    letters_sharing_one_expiry(30)
    held = DeadLetter.objects.order_by("id").first()
    locked, release, done = threading.Event(), threading.Event(), threading.Event()

    def operator():
        try:
            with transaction.atomic():
                # An operator's action in flight on one letter (its row locked until it commits).
                DeadLetter.objects.filter(pk=held.pk).update(replayed_by="carol")
                locked.set()
                release.wait(60)
        finally:
            connection.close()
            done.set()

    thread = threading.Thread(target=operator)
    if connection.vendor == "postgresql":
        thread.start()
        assert locked.wait(30)
        result = archive_expired_dead_letters(batch_size=7)  # would block here without SKIP LOCKED
        release.set()
        thread.join(30)
        # Everything else is archived; the held letter is left open for the next run.
        assert result.count == 29
        assert DeadLetter.objects.get(pk=held.pk).status == DeadLetterStatus.OPEN
        assert archive_expired_dead_letters(batch_size=7).count == 1
    else:
        # SQLite has one writer at a time: the run queues behind the operator's short
        # transaction (busy timeout), then archives every letter.
        thread.start()
        assert locked.wait(30)
        release.set()
        result = archive_expired_dead_letters(batch_size=7)
        thread.join(30)
        assert result.count == 30
    assert done.is_set()
    assert DeadLetter.objects.filter(status=DeadLetterStatus.ARCHIVED).count() == 30
