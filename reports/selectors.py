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
