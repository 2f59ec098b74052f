"""Read-side queries for report tasks."""

from reports.models import Order, ReportTask, TaskStatus


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
    from django.db.models import Count

    counts = {status: 0 for status in TaskStatus.values}
    for row in ReportTask.objects.values("status").annotate(n=Count("id")):
        counts[row["status"]] = row["n"]
    return counts


def task_by_api_id(raw_id: str) -> ReportTask | None:
    """The task an API path names by its public UUID; None for unknown or malformed ids."""
    import uuid

    try:
        public_id = uuid.UUID(str(raw_id))
    except ValueError:
        return None
    return ReportTask.objects.filter(public_id=public_id).first()


# --- console: task list (keyset-paginated by the caller) -----------------------


def console_tasks(*, status: str = "", kind: str = "", batch_public_id=None):
    """Report tasks for the console's task list, filtered; unordered (the caller pages it)."""
    qs = ReportTask.objects.select_related("batch").defer("params", "last_error")
    if status:
        qs = qs.filter(status=status)
    if kind:
        qs = qs.filter(kind=kind)
    if batch_public_id:
        qs = qs.filter(batch__public_id=batch_public_id)
    return qs


def console_task_kinds() -> list[str]:
    return list(ReportTask.objects.order_by("kind").values_list("kind", flat=True).distinct()[:200])
