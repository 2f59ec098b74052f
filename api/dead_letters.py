"""GET /report/task/dead-letters: open, not yet expired dead letters (or `status=superseded`: those a
later task made moot), newest first, keyset-paged."""

import re

from django.http import JsonResponse

from api.auth import api_endpoint
from api.errors import ApiError
from api.openapi.common import CURSOR_PATTERN, DEAD_LETTER_PAGE_MAX, DEAD_LETTER_PAGE_SIZE
from api.request_body import iso, query_param
from config.keyset import Cursor, InvalidCursor
from deadletters.filters import MAX_SEARCH_LENGTH
from deadletters.links import dead_letter_url
from deadletters.selectors.letters import message_preview, open_dead_letters_page
from reports.kinds import KINDS
from reports.models import ApiScope

DEAD_LETTER_QUERY = {"kind", "fingerprint", "q", "cursor", "limit", "status"}
LISTED_STATUSES = ("open", "superseded")
# Each as the OpenAPI document states it (api/openapi/tasks.py), so what it calls valid is served.
FINGERPRINT_PATTERN = r"^[0-9a-f]{8,40}$"
LIMIT_PATTERN = r"^[0-9]{1,4}$"
FINGERPRINT_RE, CURSOR_RE, LIMIT_RE = (
    re.compile(pattern.removesuffix("$") + r"\Z")
    for pattern in (FINGERPRINT_PATTERN, CURSOR_PATTERN, LIMIT_PATTERN)
)


def _cursor(raw: str | None) -> Cursor | None:
    if raw is None:
        return None
    if not CURSOR_RE.match(raw):
        raise ApiError(400, "is not a cursor this API returned", "cursor")
    try:
        return Cursor.decode(raw)
    except InvalidCursor:
        raise ApiError(400, "is not a cursor this API returned", "cursor") from None


def letter_filters(request, *, allowed: set[str]) -> dict:
    """The dead-letter filters of the query string (`kind`, `fingerprint`, `q`), checked as the
    OpenAPI document states them; any parameter not in `allowed` is a 400 naming it."""
    for name in request.GET:
        if name not in allowed:
            raise ApiError(400, f"unknown query parameter {name[:64]!r}", name[:64])
    kind = query_param(request, "kind")
    if kind is not None and kind not in KINDS:
        raise ApiError(400, f"must be a report kind: {', '.join(sorted(KINDS))}", "kind")
    fingerprint = query_param(request, "fingerprint")
    if fingerprint is not None and not FINGERPRINT_RE.match(fingerprint):
        raise ApiError(
            400, "must be 8 to 40 lowercase hex characters (a fingerprint or its start)", "fingerprint"
        )
    q = (query_param(request, "q") or "").replace("\x00", "").strip()
    if len(q) > MAX_SEARCH_LENGTH:
        raise ApiError(400, f"must be at most {MAX_SEARCH_LENGTH} characters", "q")
    return {"kind": kind, "fingerprint": fingerprint, "q": q}


@api_endpoint(methods=("GET",), scope=ApiScope.READ, permission="deadletters.view_deadletter")
def dead_letters(request):
    """Open dead letters: the client's own tasks', or everyone's for operator tokens and sessions."""
    filters = letter_filters(request, allowed=DEAD_LETTER_QUERY)
    raw_limit = query_param(request, "limit")
    limit = DEAD_LETTER_PAGE_SIZE
    if raw_limit is not None:
        if not LIMIT_RE.match(raw_limit) or not 1 <= int(raw_limit) <= DEAD_LETTER_PAGE_MAX:
            raise ApiError(400, f"must be an integer from 1 to {DEAD_LETTER_PAGE_MAX}", "limit")
        limit = int(raw_limit)
    status = query_param(request, "status") or "open"
    if status not in LISTED_STATUSES:
        raise ApiError(400, f"must be one of {', '.join(LISTED_STATUSES)}", "status")
    page = open_dead_letters_page(
        superseded=status == "superseded",
        **filters,
        cursor=_cursor(query_param(request, "cursor")),
        limit=limit,
        owner=request.api_client.owner_filter,
    )
    results = [
        {
            "id": letter.id,
            "task_id": str(letter.task.public_id),
            "kind": letter.kind,
            "error_type": letter.error_type,
            "error_message": message_preview(letter.error_message),
            "attempts": letter.attempts,
            "fingerprint": letter.fingerprint,
            "created_at": iso(letter.created_at),
            "expire_at": iso(letter.expire_at),
            "status": letter.status,
            "superseded_by": str(letter.superseded_by.public_id) if letter.superseded_by else None,
            "console_url": dead_letter_url(letter.id),
        }
        for letter in page.items
    ]
    return JsonResponse({"results": results, "next_cursor": page.next_cursor})
