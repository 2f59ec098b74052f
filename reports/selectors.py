"""Read-side queries for report tasks and the demo data."""

import re
import uuid

from django.db.models import Count, Q, TextField
from django.db.models.functions import Cast, Length, Substr

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


TASK_ID_PREFIX_RE = re.compile(r"^[0-9a-f]{4,32}$")


def tasks_matching(
    *, status: str = "", kind: str = "", batch_public_id=None, id_prefix: str = "", client: str = "",
    params_text: str = "",
):
    """Report tasks filtered by status, kind, batch, the start of their id (hex digits, dashes
    ignored: a range of the public_id index), the client (its token's name or who submitted) and
    text in their params; unordered (the caller pages it)."""
    qs = ReportTask.objects.select_related("batch").defer("params", "last_error")
    if status:
        qs = qs.filter(status=status)
    if kind:
        qs = qs.filter(kind=kind)
    if batch_public_id:
        qs = qs.filter(batch__public_id=batch_public_id)
    if id_prefix:
        digits = id_prefix.replace("-", "").lower()
        if not TASK_ID_PREFIX_RE.match(digits):
            return qs.none()
        low, high = digits.ljust(32, "0"), digits.ljust(32, "f")
        qs = qs.filter(public_id__gte=uuid.UUID(low), public_id__lte=uuid.UUID(high))
    if client:
        qs = qs.filter(Q(owner__name=client) | Q(submitted_by=client))
    if params_text:
        qs = qs.annotate(params_text=Cast("params", TextField())).filter(params_text__icontains=params_text)
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
