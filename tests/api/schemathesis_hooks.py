"""What the OpenAPI document cannot state, taught to Schemathesis' generator (SCHEMATHESIS_HOOKS).

JSON Schema cannot compare two fields, nor a header with a body field, nor know the
HTTP_EXPORT_ALLOWED_HOSTS setting. The API answers each of these with a documented 4xx (the
document's 400/422 descriptions; tests/api/test_api_contract.py and tests/api/test_api_submit.py
check those answers). Here a generated *valid* request that breaks one of them is made to keep it,
so "schema-valid data must be accepted" tests what the schema does state. Invalid (negative)
requests are left as generated.
"""

from datetime import date

import schemathesis
from django.conf import settings

from reports.kinds.outbound import UrlRefused, check_url

ALLOWED_URL = "http://127.0.0.1:8000/report/demo/orders.json"


def _params_in(body: dict) -> list[dict]:
    items = body.get("items") if isinstance(body.get("items"), list) else [body]
    return [item["params"] for item in items if isinstance(item, dict) and isinstance(item.get("params"), dict)]


def _allowed_url(url: object) -> bool:
    try:
        check_url(str(url), allowed_hosts=_allowed_hosts(), must_resolve=False)
    except UrlRefused:
        return False
    return True


def _allowed_hosts() -> list[str]:
    try:
        return list(settings.HTTP_EXPORT_ALLOWED_HOSTS)
    except Exception:  # noqa: BLE001 - outside Django: the demo setup's default
        return ["127.0.0.1:8000"]


def _order_dates(mapping: dict, first: str, last: str) -> None:
    start, end = mapping.get(first), mapping.get(last)
    if isinstance(start, str) and isinstance(end, str):
        try:
            if date.fromisoformat(start) > date.fromisoformat(end):
                mapping[first], mapping[last] = end, start
        except ValueError:
            pass


@schemathesis.hook
def before_call(context, case, kwargs):
    """Just before each request is sent, in every phase (the coverage phase varies a header after
    the generation hooks ran, so this is the one place that sees the request as it will go)."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or not isinstance(case.body, dict):
        return
    body = case.body
    # The Idempotency-Key header and the idempotency_key field name one key: both given must agree.
    header = (case.headers or {}).get("Idempotency-Key")
    if header is not None and "idempotency_key" in body:
        body["idempotency_key"] = header
    # A bulk action's filter: a date range ends on or after it starts.
    bulk_filter = body.get("filter") if isinstance(body.get("filter"), dict) else {}
    _order_dates(bulk_filter, "created_from", "created_to")
    for params in _params_in(body):
        # http_export fetches only what the outbound policy allows (SSRF guard): a setting, not a schema.
        if "url" in params and not _allowed_url(params["url"]):
            params["url"] = ALLOWED_URL
        # sales_summary: a range ends on or after it starts.
        start, end = params.get("date_from"), params.get("date_to")
        if isinstance(start, str) and isinstance(end, str):
            try:
                if date.fromisoformat(start) > date.fromisoformat(end):
                    params["date_from"], params["date_to"] = end, start
            except ValueError:
                pass

