"""Sales aggregated from the demo orders table (`manage.py seed_demo_data`)."""

from datetime import date, datetime, time

from django.db.models import Count, F, Sum
from django.db.models.functions import TruncMonth
from django.utils import timezone

from reports.errors import InvalidParams
from reports.kinds.base import ReportKind, RunContext, choice, reject_unknown, write_table

GROUPINGS = ("region", "product", "month")


def _date(params, field):
    raw = params.get(field)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise InvalidParams(field, "must be a date string YYYY-MM-DD")
    try:
        return date.fromisoformat(raw).isoformat()
    except ValueError:
        raise InvalidParams(field, "must be a date YYYY-MM-DD") from None


class SalesSummary(ReportKind):
    name = "sales_summary"
    title = "Sales summary"

    def validate(self, params):
        reject_unknown(params, {"format", "group_by", "date_from", "date_to"})
        cleaned = {
            "format": choice(params, "format", ("csv", "xlsx"), "csv"),
            "group_by": choice(params, "group_by", GROUPINGS, "region"),
        }
        for field in ("date_from", "date_to"):
            value = _date(params, field)
            if value:
                cleaned[field] = value
        if cleaned.get("date_from") and cleaned.get("date_to") and cleaned["date_from"] > cleaned["date_to"]:
            raise InvalidParams("date_to", "must not be before date_from")
        return cleaned

    def generate(self, params, ctx: RunContext):
        from reports.models import Order

        orders = Order.objects.all()
        tz = timezone.get_current_timezone()
        if params.get("date_from"):
            start = datetime.combine(date.fromisoformat(params["date_from"]), time.min, tzinfo=tz)
            orders = orders.filter(ordered_at__gte=start)
        if params.get("date_to"):
            end = datetime.combine(date.fromisoformat(params["date_to"]), time.max, tzinfo=tz)
            orders = orders.filter(ordered_at__lte=end)
        group_by = params["group_by"]
        if group_by == "month":
            orders = orders.annotate(month=TruncMonth("ordered_at"))
        rows = (
            orders.values(group_by)
            .annotate(orders=Count("id"), units=Sum("quantity"), revenue=Sum(F("quantity") * F("unit_price")))
            .order_by(group_by)
        )

        def table():
            for row in rows.iterator():
                key = row[group_by]
                if group_by == "month":
                    key = key.strftime("%Y-%m")
                yield [key, row["orders"], row["units"], float(row["revenue"] or 0)]

        return write_table(
            ctx.output_dir / f"sales-by-{group_by}",
            params["format"],
            [group_by, "orders", "units", "revenue"],
            table(),
        )
