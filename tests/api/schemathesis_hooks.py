"""What the OpenAPI document cannot state, taught to Schemathesis' generator (SCHEMATHESIS_HOOKS).

JSON Schema cannot compare two fields, nor a header with a body field, nor know the
HTTP_EXPORT_ALLOWED_HOSTS setting. The API answers each of these with a documented 4xx (the
document's 400/422 descriptions; tests/api/test_api_contract.py and tests/api/test_api_submit.py
check those answers). Here a generated *valid* request that breaks one of them is made to keep it,
so "schema-valid data must be accepted" tests what the schema does state. Invalid (negative)
requests are left as generated.
"""

from datetime import date
from urllib.parse import urlsplit

import schemathesis
from django.conf import settings

ALLOWED_URL = "http://127.0.0.1:8000/report/demo/orders.json"


def _params_in(body: dict) -> list[dict]:
    items = body.get("items") if isinstance(body.get("items"), list) else [body]
    return [item["params"] for item in items if isinstance(item, dict) and isinstance(item.get("params"), dict)]


def _allowed_host(url: object) -> bool:
    try:
        return urlsplit(str(url)).hostname in _allowed_hosts()
    except ValueError:
        return False


def _allowed_hosts() -> list[str]:
    try:
        return list(settings.HTTP_EXPORT_ALLOWED_HOSTS)
    except Exception:  # noqa: BLE001 - outside Django: the default setting
        return ["127.0.0.1", "localhost"]


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
    for params in _params_in(body):
        # http_export fetches only from HTTP_EXPORT_ALLOWED_HOSTS (SSRF guard): a setting, not a schema.
        if "url" in params and not _allowed_host(params["url"]):
            params["url"] = ALLOWED_URL
        # sales_summary: a range ends on or after it starts.
        start, end = params.get("date_from"), params.get("date_to")
        if isinstance(start, str) and isinstance(end, str):
            try:
                if date.fromisoformat(start) > date.fromisoformat(end):
                    params["date_from"], params["date_to"] = end, start
            except ValueError:
                pass

