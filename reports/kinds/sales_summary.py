"""Sales aggregated from the demo orders table (`manage.py seed_demo_data`). Money is Decimal end to
end: the database sums whole cents, so no float ever touches a revenue figure."""

from datetime import date, datetime, time
from decimal import Decimal

from django.db.models import BigIntegerField, Count, F, Sum
from django.db.models.functions import Cast, Round, TruncMonth
from django.utils import timezone
from django.utils.translation import gettext_noop

from reports.kinds.base import Param, ReportKind, RunContext, write_table

GROUPINGS = ("region", "product", "month")
CENT = Decimal("0.01")


class SalesSummary(ReportKind):
    name = "sales_summary"
    title = gettext_noop("Sales summary")
    params = (
        Param("format", "string", default="csv", choices=("csv", "xlsx"),
              description=gettext_noop("file format")),
        Param("group_by", "string", default="region", choices=GROUPINGS,
              description=gettext_noop("one row per")),
        Param("date_from", "date", description=gettext_noop("first day included (all orders when left out)")),
        Param(
            "date_to",
            "date",
            description=gettext_noop(
                "last day included (all orders when left out); before date_from, the two are read the "
                "other way round"
            ),
        ),
    )

    def validate(self, params):
        # A range given backwards still names two days; JSON Schema cannot compare two fields, so the
        # API accepts it as the range between them and the task's params record it forwards.
        cleaned = super().validate(params)
        if cleaned.get("date_from") and cleaned.get("date_to") and cleaned["date_from"] > cleaned["date_to"]:
            cleaned["date_from"], cleaned["date_to"] = cleaned["date_to"], cleaned["date_from"]
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
        # SQLite keeps decimals as binary floats: summing quantity * price there drifts
        # (9223615.45999998). Whole cents are integers on every database, so their sum is exact.
        cents = Cast(Round(F("unit_price") * 100), BigIntegerField())
        rows = (
            orders.values(group_by)
            .annotate(orders=Count("id"), units=Sum("quantity"), revenue_cents=Sum(F("quantity") * cents))
            .order_by(group_by)
        )

        def table():
            for row in rows.iterator():
                key = row[group_by]
                if group_by == "month":
                    key = key.strftime("%Y-%m")
                revenue = (Decimal(row["revenue_cents"] or 0) * CENT).quantize(CENT)
                yield [key, row["orders"], row["units"], revenue]

        return write_table(
            ctx.output_dir / f"sales-by-{group_by}",
            params["format"],
            [group_by, "orders", "units", "revenue"],
            table(),
            money_columns=["revenue"],
        )
