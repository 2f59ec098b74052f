"""A bulk action applied to one batch of letters as a set: a handful of statements whatever the
batch size, with exactly the outcome the single-letter services give letter by letter.

Called inside the runner's batch transaction (which also moves the bulk's cursor), so a batch is
all or nothing. Per batch:

- replay: the batch's still-replayable letters name their tasks; one conditional UPDATE ...
  RETURNING puts the tasks that are still dead back to pending (reports.services.requeue_dead_tasks,
  rows locked in id order); one UPDATE marks those tasks' replayable letters replayed by the bulk's
  actor; one INSERT writes an audit entry per replayed task (from three arrays on PostgreSQL); one
  pipelined enqueue per queue runs after commit. A run with a params patch first patches and
  validates each task's params (deadletters.bulk.patch): the refused are counted apart with their
  reasons, the others get their new params in one more UPDATE. As replay_dead_letter does one
  letter at a time, a task is replayed once however many of its letters the batch holds (the lowest
  id acts, the others are skipped), and every replayable letter of a replayed task is marked, in the
  selection or not.
- archive, discard, restore: one locking SELECT of the letters still in a from-state (id order),
  one UPDATE of exactly those, one bulk INSERT of their audit entries.

A letter that changed meanwhile (replayed, archived or discarded by someone else, its task no
longer dead, deleted) is not touched and counts as skipped, as it did letter by letter.
"""

import json
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from deadletters.audit import REASON_MAX
from deadletters.bulk.patch import patch_batch
from deadletters.models import AuditEntry, BulkAction, DeadLetter, DeadLetterStatus
from deadletters.services.letters import REPLAYABLE_STATUSES
from deadletters.services.transitions import ARCHIVABLE_STATUSES, DISCARDABLE_STATUSES, RESTORABLE_STATUSES
from reports.models import ReportTask, TaskStatus
from reports.services import requeue_dead_tasks


@dataclass(frozen=True)
class BatchOutcome:
    succeeded: int
    skipped: int
    refused: tuple[dict, ...] = ()  # neither: a params patch made them invalid ({"dead_letter", "reasons"})


def apply_to_batch(bulk: BulkAction, ids: list[int]) -> BatchOutcome:
    """Apply the bulk's action to the letters `ids` (what the runner walked to); must run inside
    the caller's transaction."""
    assert transaction.get_connection().in_atomic_block, "a batch commits with the bulk's cursor"
    if not ids:
        return BatchOutcome(0, 0)
    now = timezone.now()
    refused: list[dict] = []
    if bulk.action == "replay":
        succeeded = _replay(bulk, ids, now, refused)
    else:
        succeeded = _transition(bulk, ids, now)
    skipped = len(ids) - succeeded - len(refused)
    return BatchOutcome(succeeded=succeeded, skipped=skipped, refused=tuple(refused))


def _insert_audit(bulk: BulkAction, action: str, rows: list[tuple[int, int, dict]], now) -> None:
    """One audit entry per (task id, letter id, details), as record_audit would write it."""
    if not rows:
        return
    reason, actor = bulk.reason[:REASON_MAX], bulk.actor[:150]
    if connection.vendor != "postgresql":
        AuditEntry.objects.bulk_create(
            AuditEntry(
                created_at=now,
                action=action,
                actor=actor,
                source=bulk.source,
                ip_address=bulk.ip_address,
                task_id=task_id,
                dead_letter_id=letter_id,
                item_count=1,
                reason=reason,
                details=details,
            )
            for task_id, letter_id, details in rows
        )
        return
    # Three arrays instead of ten parameters a row: PostgreSQL builds the rows itself, and a
    # batch of a thousand audit entries costs one short statement.
    qn = connection.ops.quote_name
    columns = ", ".join(
        qn(c)
        for c in ("created_at", "action", "actor", "source", "ip_address", "task_id", "dead_letter_id")
        + ("item_count", "reason", "details")
    )
    sql = (
        f"INSERT INTO {qn(AuditEntry._meta.db_table)} ({columns}) "
        "SELECT %s, %s, %s, %s, %s::inet, u.task_id, u.letter_id, 1, %s, u.details::jsonb "
        "FROM unnest(%s::bigint[], %s::bigint[], %s::text[]) AS u(task_id, letter_id, details)"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [
                now,
                action,
                actor,
                bulk.source,
                bulk.ip_address,
                reason,
                [task_id for task_id, _, _ in rows],
                [letter_id for _, letter_id, _ in rows],
                [json.dumps(details) for _, _, details in rows],
            ],
        )


def _replay(bulk: BulkAction, ids: list[int], now, refused: list[dict]) -> int:
    acting: dict[int, int] = {}  # task id -> the lowest letter id of the batch naming it
    for letter_id, task_id in (
        DeadLetter.objects.filter(pk__in=ids, status__in=REPLAYABLE_STATUSES)
        .order_by("pk")
        .values_list("pk", "task_id")
    ):
        acting.setdefault(task_id, letter_id)
    edits: dict[int, tuple[dict, dict, str]] = {}  # task id -> its new params, their diff and digest
    if bulk.params_patch:
        acting, edits, refusals = patch_batch(bulk.params_patch, acting)
        refused += refusals
    requeued = requeue_dead_tasks(acting, now=now)
    if not requeued:
        return 0
    replayed_tasks = [row.task_id for row in requeued]
    edits = {pk: edits[pk] for pk in replayed_tasks if pk in edits}
    if edits:  # the tasks are ours (pending, locked): their new params, one prepared UPDATE
        _set_params(edits)
    # These tasks are ours now (pending, rows locked): their replayable letters cannot change
    # under us, so reading them and then updating them is one consistent step.
    letters = list(
        DeadLetter.objects.filter(task_id__in=replayed_tasks, status__in=REPLAYABLE_STATUSES).values_list(
            "pk", "task_id", "created_at"
        )
    )
    DeadLetter.objects.filter(pk__in=[pk for pk, _, _ in letters], status__in=REPLAYABLE_STATUSES).update(
        status=DeadLetterStatus.REPLAYED, replayed_at=now, replayed_by=bulk.actor[:150], replayed_in=bulk
    )
    newest: dict[int, tuple] = {}  # the audit entry links the task's newest letter, as replay_task does
    for pk, task_id, created_at in letters:
        if task_id not in newest or (created_at, pk) > newest[task_id]:
            newest[task_id] = (created_at, pk)
    details = {pk: {"dead_letter": acting[pk], "bulk": str(bulk.public_id)} for pk in replayed_tasks}
    for task_id, (_after, diff, _digest) in edits.items():
        details[task_id]["params_diff"] = diff  # what an edited single-letter replay records
    _insert_audit(bulk, "replay", [(pk, newest[pk][1], details[pk]) for pk in replayed_tasks], now)
    return len(replayed_tasks)


def _set_params(edits: dict[int, tuple[dict, dict, str]]) -> None:
    """Each task's own new params and their digest (as an edited single replay writes them): one
    statement from three arrays on PostgreSQL, one prepared UPDATE run for each task elsewhere."""
    table = connection.ops.quote_name(ReportTask._meta.db_table)
    rows = [(pk, json.dumps(after), digest) for pk, (after, _diff, digest) in edits.items()]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"UPDATE {table} SET params = u.params::jsonb, params_digest = u.digest "
                f"FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS u(id, params, digest) "
                f"WHERE {table}.id = u.id AND {table}.status = %s",
                [[row[0] for row in rows], [row[1] for row in rows], [row[2] for row in rows],
                 TaskStatus.PENDING],
            )
        else:
            cursor.executemany(
                f"UPDATE {table} SET params = %s, params_digest = %s WHERE id = %s AND status = %s",
                [(params, digest, pk, TaskStatus.PENDING) for pk, params, digest in rows])


_TRANSITIONS = {
    "archive": (ARCHIVABLE_STATUSES, DeadLetterStatus.ARCHIVED),
    "discard": (DISCARDABLE_STATUSES, DeadLetterStatus.DISCARDED),
    "restore": (RESTORABLE_STATUSES, DeadLetterStatus.OPEN),
}


def _updates(action: str, now) -> dict:
    if action == "archive":
        return {"archived_at": now}
    if action == "discard":
        return {"discarded_at": now}
    # A restored letter gets a fresh retention period (see deadletters.services.transitions).
    return {
        "archived_at": None,
        "discarded_at": None,
        "expire_at": now + timedelta(days=settings.DEADLETTER_RETENTION_DAYS),
    }


def _transition(bulk: BulkAction, ids: list[int], now) -> int:
    from_statuses, to_status = _TRANSITIONS[bulk.action]
    # Locked in id order: concurrent bulks over overlapping letters queue instead of deadlocking.
    eligible = list(
        DeadLetter.objects.select_for_update()
        .filter(pk__in=ids, status__in=from_statuses)
        .order_by("pk")
        .values_list("pk", "task_id")
    )
    if not eligible:
        return 0
    DeadLetter.objects.filter(pk__in=[pk for pk, _ in eligible], status__in=from_statuses).update(
        status=to_status, **_updates(bulk.action, now)
    )
    details = {"bulk": str(bulk.public_id)}
    _insert_audit(bulk, bulk.action, [(task_id, pk, details) for pk, task_id in eligible], now)
    return len(eligible)
