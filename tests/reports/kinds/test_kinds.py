"""Report kinds: the parameter declarations every face reads, exact money, idempotent demo data."""

import csv
from collections import defaultdict
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from reports.errors import InvalidParams
from reports.kinds import KINDS
from reports.kinds.base import InvalidParamsList, Param, RunContext
from reports.kinds.sales_summary import SalesSummary
from reports.models import Order

# --- Param: the one declaration validate(), the console and the OpenAPI document share ---------


def test_a_param_cleans_by_its_type_and_range():
    seconds = Param("sleep_seconds", "number", default=0, minimum=0, maximum=3600)
    assert seconds.clean({}) == 0
    assert seconds.clean({"sleep_seconds": 2.5}) == 2.5
    for bad in ("1", True, None, float("nan"), -1, 3601):
        with pytest.raises(InvalidParams) as exc:
            seconds.clean({"sleep_seconds": bad})
        assert exc.value.field == "sleep_seconds"


def test_an_integer_param_takes_what_json_schema_calls_an_integer():
    count = Param("fail_attempts", "integer", default=0, minimum=0, maximum=1000)
    assert count.clean({"fail_attempts": 2.0}) == 2
    assert isinstance(count.clean({"fail_attempts": 2.0}), int)
    with pytest.raises(InvalidParams, match="must be an integer"):
        count.clean({"fail_attempts": 2.5})


def test_a_date_param_is_strictly_yyyy_mm_dd():
    day = Param("date_from", "date")
    assert day.clean({}) is None
    assert day.clean({"date_from": "2026-02-28"}) == "2026-02-28"
    # date.fromisoformat alone would take the basic form and week dates.
    for bad in ("20260228", "2026-W09-6", "2026-02-30", "2026-2-28", 20260228):
        with pytest.raises(InvalidParams, match="YYYY-MM-DD"):
            day.clean({"date_from": bad})


def test_a_param_describes_itself_as_json_schema():
    assert Param("format", "string", default="csv", choices=("csv", "xlsx")).json_schema() == {
        "type": "string",
        "enum": ["csv", "xlsx"],
        "default": "csv",
    }
    assert Param("n", "integer", default=0, minimum=0, maximum=9, description="how many").json_schema() == {
        "type": "integer",
        "minimum": 0,
        "maximum": 9,
        "default": 0,
        "description": "how many",
    }


def test_validate_reports_every_bad_field_at_once():
    with pytest.raises(InvalidParamsList) as exc:
        KINDS["probe"].validate({"sleep_seconds": "soon", "fail_attempts": -1, "colour": "red"})
    assert exc.value.errors == [
        ("colour", "unknown parameter"),
        ("sleep_seconds", "must be a number"),
        ("fail_attempts", "must be between 0 and 1000"),
    ]
    # Where one field is expected (the API's 422) it reads as its first error.
    assert (exc.value.field, exc.value.message) == ("colour", "unknown parameter")


def test_a_sales_range_given_backwards_is_recorded_forwards():
    kind = KINDS["sales_summary"]
    assert kind.validate({"date_from": "2026-03-01", "date_to": "2026-02-01"}) == {
        "format": "csv", "group_by": "region", "date_from": "2026-02-01", "date_to": "2026-03-01"
    }
    assert kind.validate({"date_to": "2026-02-01"}) == {
        "format": "csv", "group_by": "region", "date_to": "2026-02-01"}


def test_every_kind_declares_what_its_validation_accepts():
    """A value the declaration offers as default or choice is one validate() accepts."""
    for kind in KINDS.values():
        assert kind.params, f"{kind.name} declares no params"
        defaults = {p.name: p.default_value() for p in kind.params if p.default_value() is not None}
        kind.validate(defaults)
        for param in kind.params:
            for option in param.choices:
                kind.validate({param.name: option})
        assert set(kind.params_schema()["properties"]) == {p.name for p in kind.params}


# --- sales_summary: money is Decimal end to end --------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("group_by", ["region", "month"])
def test_sales_summary_revenue_is_exact_to_the_cent(group_by, tmp_path):
    call_command("seed_demo_data", rows=10_000, verbosity=0)
    expected: dict[str, Decimal] = defaultdict(Decimal)
    for order in Order.objects.all():
        # Months in the team's time zone (TIME_ZONE), as the report counts them.
        key = order.region if group_by == "region" else timezone.localtime(order.ordered_at).strftime("%Y-%m")
        expected[key] += order.quantity * order.unit_price
    params = SalesSummary().validate({"group_by": group_by})

    path = SalesSummary().generate(params,
                                   RunContext(task_id=1, public_id="t", attempt=1, output_dir=tmp_path))

    rows = list(csv.DictReader(StringIO(path.read_text(encoding="utf-8-sig"))))
    assert {row[group_by]: row["revenue"] for row in rows} == {
        key: str(value.quantize(Decimal("0.01"))) for key, value in expected.items()
    }


# --- seed_demo_data: running it twice does not double the figures ---------------------------------


@pytest.mark.django_db
def test_seeding_twice_leaves_the_orders_as_they_were():
    first = StringIO()
    call_command("seed_demo_data", rows=300, stdout=first)
    before = list(Order.objects.order_by("pk").values_list("region", "quantity", "unit_price"))

    again = StringIO()
    call_command("seed_demo_data", rows=300, stdout=again)

    assert Order.objects.count() == 300
    assert list(Order.objects.order_by("pk").values_list("region", "quantity", "unit_price")) == before
    assert "seeded 300 demo orders" in first.getvalue()
    assert "300 demo orders already exist; nothing seeded" in again.getvalue()


@pytest.mark.django_db
def test_replace_starts_the_demo_data_over():
    call_command("seed_demo_data", rows=200, verbosity=0)
    call_command("seed_demo_data", rows=50, replace=True, verbosity=0)
    assert Order.objects.count() == 50
