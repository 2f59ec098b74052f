"""Read-side queries for report tasks and the demo data."""

import uuid

from django.db.models import Count
from django.db.models.functions import Length, Substr

from reports.models import ApiToken, Order, ReportBatch, ReportTask, TaskStatus


def demo_orders_sample(*, limit: int) -> list[dict]:
    rows = Order.objects.order_by("-ordered_at").values(
        "id", "ordered_at", "region", "product", "customer", "quantity", "unit_price"
    )[:limit]
    return [
        {**row, "ordered_at": row["ordered_at"].isoformat(), "unit_price": str(row["unit_price"])}
        for row in rows
    ]


def task_by_public_id(public_id) -> ReportTask | None:
    return ReportTask.objects.filter(public_id=public_id).first()


def task_status_counts() -> dict[str, int]:
    counts = {status: 0 for status in TaskStatus.values}
    for row in ReportTask.objects.values("status").annotate(n=Count("id")):
        counts[row["status"]] = row["n"]
    return counts


def _uuid_or_none(raw_id: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(raw_id))
    except ValueError:
        return None


def task_by_api_id(raw_id: str, *, owner: ApiToken | None = None) -> ReportTask | None:
    """The task an API path names by its public UUID; None for unknown or malformed ids, and for
    another client's task when `owner` is given (None: any task, for sessions and operator tokens)."""
    public_id = _uuid_or_none(raw_id)
    if public_id is None:
        return None
    qs = ReportTask.objects.filter(public_id=public_id)
    return (qs.filter(owner=owner) if owner is not None else qs).first()


def batch_by_api_id(raw_id: str, *, owner: ApiToken | None = None) -> ReportBatch | None:
    """As task_by_api_id, for a batch."""
    public_id = _uuid_or_none(raw_id)
    if public_id is None:
        return None
    qs = ReportBatch.objects.filter(public_id=public_id)
    return (qs.filter(owner=owner) if owner is not None else qs).first()


def api_tokens() -> list[ApiToken]:
    """Every API token, active and revoked, by name (only hashes of the secrets are stored)."""
    return list(ApiToken.objects.order_by("name"))


def tasks_matching(*, status: str = "", kind: str = "", batch_public_id=None):
    """Report tasks filtered by status, kind and batch; unordered (the caller pages it)."""
    qs = ReportTask.objects.select_related("batch").defer("params", "last_error")
    if status:
        qs = qs.filter(status=status)
    if kind:
        qs = qs.filter(kind=kind)
    if batch_public_id:
        qs = qs.filter(batch__public_id=batch_public_id)
    return qs


def task_kinds_seen() -> list[str]:
    return list(ReportTask.objects.order_by("kind").values_list("kind", flat=True).distinct()[:200])


def task_attempts(task) -> list:
    """The attempt history, tracebacks cut short in the DB."""
    return list(
        task.attempts.defer("traceback")
        .annotate(traceback_head=Substr("traceback", 1, 20_000), traceback_length=Length("traceback"))
        .order_by("number")
    )
