"""Supersession: an open dead letter whose report (the same kind, params and client, as the task's
params_digest says) was later submitted again and ended `done` in another task is moot. It
becomes `superseded`, names that task, leaves the open counts (the triggers count 'open' only)
and is skipped by bulk replays unless they ask for it (deadletters/bulk/selection.py).

A housekeeper duty walks the letters in batches of ids (their primary key, so each batch reads
its rows, and their tasks, mostly in the order they lie on disk); each batch is ONE conditional
UPDATE of its open letters whose first done task of the same digest, submitted after the letter's
task, exists, with one audit entry of the system for the letters it marked. That condition is a
correlated subquery, not EXISTS: PostgreSQL turns an EXISTS into a join that hashes every done
task for each batch, where the subquery stays two index probes per open letter (bench/supersede.py
prints the plan). The UPDATE requires status 'open', so two housekeepers mark a letter once. Tasks
older than params_digest have none and supersede nothing.
"""

from django.db import connection, transaction
from django.db.models import Max, Min

from deadletters.audit import record_audit
from deadletters.models import DeadLetter, DeadLetterStatus
from reports.models import ReportTask, TaskStatus

BATCH_SIZE = 5000


def supersede_statement() -> str:
    """The UPDATE of one batch: its open letters (ids in (%s, %s]) that a later done task made moot."""
    qn = connection.ops.quote_name
    letters, tasks = qn(DeadLetter._meta.db_table), qn(ReportTask._meta.db_table)
    pk, status, digest = qn("id"), qn("status"), qn("params_digest")
    later = (
        f"(SELECT MIN(later.{pk}) FROM {tasks} own JOIN {tasks} later ON later.{digest} = own.{digest} "
        f"AND later.{status} = '{TaskStatus.DONE}' AND later.{pk} > own.{pk} "
        f"WHERE own.{pk} = {letters}.{qn('task_id')})"
    )
    # SQLite is told to read the id range (without statistics it would read every open letter).
    return (
        f"UPDATE {letters}{' NOT INDEXED' if connection.vendor == 'sqlite' else ''} "
        f"SET {status} = '{DeadLetterStatus.SUPERSEDED}', {qn('superseded_by_id')} = {later} "
        f"WHERE {pk} > %s AND {pk} <= %s AND {status} = '{DeadLetterStatus.OPEN}' AND {later} IS NOT NULL"
    )


def letters_supersede(*, batch_size: int = BATCH_SIZE) -> int:
    """Mark every open letter made moot by a later done task; returns how many were marked."""
    ids = DeadLetter.objects.aggregate(low=Min("pk"), high=Max("pk"))
    marked, sql = 0, supersede_statement()
    for after in range((ids["low"] or 1) - 1, ids["high"] or 0, batch_size):
        with transaction.atomic():
            with connection.cursor() as cursor:
                if connection.vendor == "postgresql":  # compiling it would cost a third of the batch
                    cursor.execute("SET LOCAL jit = off")
                cursor.execute(sql, [after, after + batch_size])
                changed = cursor.rowcount
            if changed:
                record_audit(action="supersede", source="system", item_count=changed)
        marked += changed
    return marked
