"""Reading what an API client sent: the JSON body, query parameters, the idempotency key."""

import json
import re

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http.request import RawPostDataException

from api.errors import ApiError
from api.openapi.common import IDEMPOTENCY_KEY
from reports.services import contains_nul

# Checked exactly as the OpenAPI document states it: 1-200 printable ASCII characters, not
# starting or ending with a space.
_IDEMPOTENCY_KEY = re.compile(IDEMPOTENCY_KEY["pattern"].removesuffix("$") + r"\Z")


def iso(value):
    return value.isoformat() if value else None


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def read_json_object(
    request, *, allowed: set[str], required: bool = True, max_bytes: int | None = None
) -> dict:
    """The request body as a JSON object, or ApiError: 413 too big, 415 not JSON, 400 malformed."""
    limit = max_bytes or settings.API_MAX_BODY_BYTES
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApiError(400, "Content-Length is not a number") from None
    if length > limit:
        raise ApiError(413, f"the body is {length} bytes; the limit is {limit}")
    try:
        body = request.body
    except RequestDataTooBig:
        raise ApiError(413, f"the body is over the limit of {limit} bytes") from None
    except RawPostDataException:
        # A form body the CSRF check of a session POST already parsed: not JSON anyway.
        raise ApiError(415, f"Content-Type must be application/json, not {request.content_type!r}") from None
    if len(body) > limit:
        raise ApiError(413, f"the body is over the limit of {limit} bytes")
    if not body:  # blanks are a body: not the JSON object the document asks (400 below)
        if required:
            raise ApiError(400, "the body must be a JSON object")
        return {}
    content_type = request.content_type or ""
    if content_type != "application/json":
        raise ApiError(415, f"Content-Type must be application/json, not {content_type or 'missing'!r}")
    charset = (request.content_params or {}).get("charset", "utf-8").lower()
    if charset not in ("utf-8", "utf8"):
        raise ApiError(415, "the body must be UTF-8 encoded JSON")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "the body is not valid UTF-8") from None
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"the body is not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    if contains_nul(data):
        # No database column takes NUL (PostgreSQL refuses it in text and JSON).
        raise ApiError(400, "the body holds a NUL character (\\u0000), which is never accepted")
    for name in data:
        if name not in allowed:
            raise ApiError(
                400, f"unknown field {name[:64]!r}; allowed: {', '.join(sorted(allowed))}", name[:64]
            )
    return data


def query_param(request, name: str) -> str | None:
    values = request.GET.getlist(name)
    if len(values) > 1:
        raise ApiError(400, f"give {name} at most once", name)
    return values[0] if values else None


def idempotency_key(request, data: dict):
    """The key from the Idempotency-Key header or the `idempotency_key` field; both given must agree.
    Two keys for one request conflict as a key reused with other params does: a 409, the answer a
    client already handles for its key (and the JSON Schema of a body cannot compare a header)."""
    header_key = request.headers.get("Idempotency-Key")
    body_key = data.get("idempotency_key")
    given = [key for key in (header_key,) if key is not None] + (
        [body_key] if "idempotency_key" in data else []  # a null key is a wrong key, not "no key"
    )
    for key in given:
        if not (isinstance(key, str) and _IDEMPOTENCY_KEY.match(key)):
            raise ApiError(
                422,
                "must be 1 to 200 printable ASCII characters, not starting or ending with a space",
                "idempotency_key",
            )
    if header_key is not None and body_key is not None and header_key != body_key:
        raise ApiError(409, "the Idempotency-Key header and the idempotency_key field differ",
                       "idempotency_key")
    return header_key if header_key is not None else body_key
