"""Batches: scatter N independent tasks, let each worker write only its own task row, and derive
progress and completion by counting (one GROUP BY on the (batch, status) index). Workers never
write the batch row; only the aggregator changes its status, with conditional UPDATEs."""

import json
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, OuterRef
from django.utils import timezone

from reports.errors import InvalidParams
from reports.models import ApiToken, BatchStatus, ReportBatch, ReportTask, TaskStatus
from reports.services.enqueue import enqueue_attempts_many, enqueue_batch_fan_out
from reports.services.submission import params_digest, validate_idempotency_key, validate_submission
from transport.queues import on_commit_robust

logger = logging.getLogger(__name__)

ACTIVE = (TaskStatus.PENDING, TaskStatus.RETRYING, TaskStatus.RUNNING)
ITEM_FIELDS = {"kind", "params", "priority"}
NAME_MAX = 200
BULK_SIZE = 1000


class BatchInvalid(Exception):
    """All-or-nothing validation: `errors` = [{"index": i | None, "field": f, "error": msg}, ...]."""

    def __init__(self, errors: list[dict]):
        super().__init__(f"{len(errors)} invalid item(s)")
        self.errors = errors


class BatchConflict(Exception):
    """The idempotency key was used for a batch with other items."""

    def __init__(self, batch: ReportBatch):
        super().__init__(f"idempotency key already used for batch {batch.public_id} with other items")
        self.batch = batch


def _clean_items(items: object, priority: object) -> list[tuple[str, dict, str]]:
    if not isinstance(items, list) or not items:
        raise BatchInvalid([{"index": None, "field": "items", "error": "must be a non-empty list"}])
    if len(items) > settings.REPORT_BATCH_MAX_ITEMS:
        raise BatchInvalid(
            [
                {
                    "index": None,
                    "field": "items",
                    "error": f"has {len(items)} items; the limit is {settings.REPORT_BATCH_MAX_ITEMS}",
                }
            ]
        )
    if priority not in (None, "") and priority not in settings.REPORT_QUEUES:
        raise BatchInvalid(
            [
                {
                    "index": None,
                    "field": "priority",
                    "error": f"must be one of {', '.join(settings.REPORT_QUEUES)}",
                }
            ]
        )
    cleaned, errors = [], []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            errors.append({"index": index, "field": "item", "error": "must be an object"})
            continue
        unknown = sorted(set(item) - ITEM_FIELDS)
        if unknown:
            errors.append({"index": index, "field": str(unknown[0])[:64], "error": "unknown field"})
            continue
        try:
            cleaned.append(
                validate_submission(
                    kind=item.get("kind"),
                    params=item.get("params"),
                    # An item's own priority counts when given at all: [] or 0 are errors, not "absent".
                    priority=priority if item.get("priority") in (None, "") else item["priority"],
                )
            )
        except InvalidParams as exc:
            errors.append({"index": index, "field": exc.field, "error": exc.message})
    if errors:
        raise BatchInvalid(errors)
    return cleaned


def enqueue_batch_tasks(*, batch_id: int) -> int:
    """Enqueue the first attempt of every batch task still waiting for it, one pipeline per queue.

    Also the body of the fan-out job; a second run only makes phantom deliveries."""
    jobs = (
        ReportTask.objects.filter(batch_id=batch_id, status=TaskStatus.PENDING, attempt=0)
        .order_by("pk")
        .values_list("pk", "priority", "timeout_seconds", "kind")
    )
    return enqueue_attempts_many([(pk, 1, priority, timeout, kind) for pk, priority, timeout, kind in jobs])


def submit_batch(
    *,
    items: object,
    idempotency_key: object = None,
    name: object = "",
    submitted_by: str = "",
    priority: object = None,
    owner: ApiToken | None = None,
) -> tuple[ReportBatch, bool]:
    """Create a batch and its tasks in one transaction; enqueue them with one pipeline per queue
    after commit. `priority` applies to items without their own; `owner` (the API client, None for
    operators) owns the batch and its tasks, and its idempotency keys. Returns (batch, created)."""
    if not isinstance(name, str) or len(name) > NAME_MAX:
        raise BatchInvalid(
            [{"index": None, "field": "name", "error": f"must be text of at most {NAME_MAX} characters"}]
        )
    try:
        key = validate_idempotency_key(idempotency_key)
    except InvalidParams as exc:
        raise BatchInvalid([{"index": None, "field": exc.field, "error": exc.message}]) from None
    cleaned = _clean_items(items, priority)
    if key:
        existing = ReportBatch.objects.filter(owner=owner, idempotency_key=key).first()
        if existing is not None:
            return _idempotent_repeat(existing, cleaned), False
    try:
        with transaction.atomic():
            batch = ReportBatch.objects.create(
                name=name, idempotency_key=key, submitted_by=submitted_by[:150], total=len(cleaned),
                owner=owner,
            )
            _insert_tasks(batch, cleaned, submitted_by=submitted_by[:150])
            # robust: a Redis outage at commit is logged; the reaper enqueues the tasks later.
            if batch.total <= settings.REPORT_BATCH_INLINE_ENQUEUE_MAX:
                on_commit_robust(enqueue_batch_tasks, batch_id=batch.pk)
            else:
                # RQ spends ~0.1 ms of CPU per job it creates: 10,000 would cost the client a
                # second. One job on the high queue does the same pipelined enqueue instead.
                on_commit_robust(enqueue_batch_fan_out, batch_id=batch.pk)
    except IntegrityError:
        if not key:
            raise
        existing = ReportBatch.objects.filter(owner=owner, idempotency_key=key).first()
        if existing is None:
            raise
        return _idempotent_repeat(existing, cleaned), False
    logger.info("submitted batch %s with %s task(s)", batch.public_id, batch.total)
    return batch, True


VARYING = ("public_id", "kind", "params", "priority", "params_digest")


def _insert_tasks(batch: ReportBatch, cleaned: list[tuple[str, dict, str]], *, submitted_by: str) -> None:
    """INSERT the batch's tasks without the ORM's per-field, per-row preparation (bulk_create
    spends about 2 s of CPU on 10,000 rows). The fields every row shares are prepared once, by
    the same Field methods the ORM uses; only public_id, kind, params and priority vary."""
    connection = transaction.get_connection()
    template = ReportTask(
        kind="",
        params={},
        priority="default",
        max_attempts=settings.REPORT_MAX_ATTEMPTS,
        timeout_seconds=settings.REPORT_JOB_TIMEOUT,
        submitted_by=submitted_by,
        batch=batch,
        owner_id=batch.owner_id,
    )
    fields = [f for f in ReportTask._meta.concrete_fields if not f.primary_key]
    shared = {
        f.attname: f.get_db_prep_save(f.pre_save(template, add=True), connection)
        for f in fields
        if f.attname not in VARYING
    }
    by_name = {f.attname: f for f in fields}
    quote = connection.ops.quote_name
    table = quote(ReportTask._meta.db_table)
    columns = ", ".join(quote(f.column) for f in fields)
    if connection.vendor == "postgresql":
        # One statement per chunk with one array parameter per varying column (unnest): the
        # query text stays small, so the driver does not parse thousands of placeholders.
        select, select_params = [], []
        for f in fields:
            if f.attname in VARYING:
                select.append(f"u.{f.attname}::{f.cast_db_type(connection)}")
            else:
                select.append(f"%s::{f.cast_db_type(connection)}")
                select_params.append(shared[f.attname])
        sql = (
            f"INSERT INTO {table} ({columns}) SELECT {', '.join(select)} "
            "FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::text[]) "
            "AS u(public_id, kind, params, priority, params_digest)"
        )
        with connection.cursor() as cursor:
            for start in range(0, len(cleaned), BULK_SIZE * 5):
                chunk = cleaned[start : start + BULK_SIZE * 5]
                arrays = [
                    [uuid.uuid4() for _ in chunk],
                    [kind for kind, _, _ in chunk],
                    [json.dumps(params) for _, params, _ in chunk],
                    [priority for _, _, priority in chunk],
                    [params_digest(kind, params, batch.owner_id) for kind, params, _ in chunk],
                ]
                cursor.execute(sql, [*select_params, *arrays])
        return
    public_id, params_field = by_name["public_id"], by_name["params"]
    rows = []
    for kind, params, priority in cleaned:
        values = {
            **shared,
            "public_id": public_id.get_db_prep_save(uuid.uuid4(), connection),
            "kind": kind,
            "params": params_field.get_db_prep_save(params, connection),
            "priority": priority,
            "params_digest": params_digest(kind, params, batch.owner_id),
        }
        rows.append([values[f.attname] for f in fields])
    sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), BULK_SIZE):
            cursor.executemany(sql, rows[start : start + BULK_SIZE])


def _idempotent_repeat(existing: ReportBatch, cleaned: list[tuple[str, dict, str]]) -> ReportBatch:
    if existing.total != len(cleaned):
        raise BatchConflict(existing)
    stored = existing.tasks.order_by("pk").values_list("kind", "params")
    if any(row != (kind, params) for row, (kind, params, _) in zip(stored, cleaned, strict=True)):
        raise BatchConflict(existing)
    return existing


# --- progress -----------------------------------------------------------------


@dataclass(frozen=True)
class BatchProgress:
    total: int
    done: int
    dead: int
    running: int
    pending: int  # not started yet or waiting for a retry (retrying is counted here too)
    retrying: int
    cancelled: int = 0

    @property
    def finished(self) -> int:
        return self.done + self.dead + self.cancelled

    @property
    def percent(self) -> float:
        if not self.total:
            return 100.0
        return int(self.finished * 1000 / self.total) / 10  # rounded down: 100.0 only when all finished

    def as_dict(self) -> dict:
        return {
            "total": self.total,
            "done": self.done,
            "dead": self.dead,
            "running": self.running,
            "pending": self.pending,
            "retrying": self.retrying,
            "cancelled": self.cancelled,
            "percent": self.percent,
        }


def batch_progress(*, batch: ReportBatch) -> BatchProgress:
    """One GROUP BY over the batch's tasks (index task_batch_status): one consistent snapshot."""
    counts = dict(
        ReportTask.objects.filter(batch_id=batch.pk)
        .order_by()
        .values_list("status")
        .annotate(n=Count("*"))  # COUNT(*): the (batch, status) index alone can answer it
        .values_list("status", "n")
    )
    return BatchProgress(
        total=sum(counts.values()),
        done=counts.get(TaskStatus.DONE, 0),
        dead=counts.get(TaskStatus.DEAD, 0),
        running=counts.get(TaskStatus.RUNNING, 0),
        pending=counts.get(TaskStatus.PENDING, 0) + counts.get(TaskStatus.RETRYING, 0),
        retrying=counts.get(TaskStatus.RETRYING, 0),
        cancelled=counts.get(TaskStatus.CANCELLED, 0),
    )


# --- aggregator ---------------------------------------------------------------


@dataclass
class AggregateReport:
    completed: int = 0
    reopened: int = 0


def aggregate_batches(*, now: datetime | None = None, limit: int = 500) -> AggregateReport:
    """One aggregator pass: complete open batches with nothing pending, retrying or running;
    reopen completed batches whose dead tasks were replayed. Idempotent and safe from several
    processes at once. The summary of a completed batch is the alert layer's to write, once per
    batch (summary_alerted_at: deadletters/alerts/outbox.py, batch_summaries_write)."""
    now = now or timezone.now()
    report = AggregateReport()
    active = ReportTask.objects.filter(batch_id=OuterRef("pk"), status__in=ACTIVE)
    # Driven by the few active tasks, not by the whole batch history.
    report.reopened = ReportBatch.objects.filter(
        status=BatchStatus.COMPLETED,
        pk__in=ReportTask.objects.filter(status__in=ACTIVE, batch__isnull=False).values("batch_id"),
    ).update(status=BatchStatus.OPEN, finished_at=None)
    candidates = list(
        ReportBatch.objects.filter(status=BatchStatus.OPEN)
        .exclude(Exists(active))
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )
    for pk in candidates:
        completed = (
            ReportBatch.objects.filter(pk=pk, status=BatchStatus.OPEN)
            .exclude(Exists(active))
            .update(status=BatchStatus.COMPLETED, finished_at=now)
        )
        if completed:  # else another aggregator, or a task went back to pending meanwhile
            report.completed += 1
            logger.info("batch %s completed", pk)
    return report
