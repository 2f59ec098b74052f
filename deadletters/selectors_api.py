"""The API's dead-letter list: open, not yet expired, newest first, keyset-paginated."""

import base64
import json
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from deadletters.models import DeadLetter, DeadLetterStatus

ERROR_MESSAGE_PREVIEW = 300


class BadCursor(ValueError):
    pass


@dataclass(frozen=True)
class DeadLetterPage:
    rows: list[dict]
    next_cursor: str | None


def encode_cursor(created_at: datetime, pk: int) -> str:
    raw = json.dumps({"c": created_at.isoformat(), "i": pk}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
        created_at = datetime.fromisoformat(data["c"])
        pk = data["i"]
    except (ValueError, TypeError, KeyError) as exc:
        raise BadCursor("is not a cursor this API returned") from exc
    if not isinstance(pk, int) or isinstance(pk, bool) or created_at.tzinfo is None:
        raise BadCursor("is not a cursor this API returned")
    return created_at, pk


def preview(message: str) -> str:
    first = message.strip().splitlines()[0] if message.strip() else ""
    return first if len(first) <= ERROR_MESSAGE_PREVIEW else first[: ERROR_MESSAGE_PREVIEW - 1] + "…"


def open_dead_letters_page(
    *, kind: str | None = None, fingerprint: str | None = None, cursor: str | None = None, limit: int = 50
) -> DeadLetterPage:
    now = timezone.now()
    qs = DeadLetter.objects.filter(status=DeadLetterStatus.OPEN, expire_at__gt=now)
    if kind:
        qs = qs.filter(kind=kind)
    if fingerprint:
        qs = qs.filter(fingerprint=fingerprint)
    if cursor:
        created_at, pk = decode_cursor(cursor)
        # The redundant `created_at <=` bound lets PostgreSQL start the index scan at the cursor.
        qs = qs.filter(created_at__lte=created_at).filter(
            Q(created_at__lt=created_at) | Q(created_at=created_at, pk__lt=pk)
        )
    rows = list(
        qs.order_by("-created_at", "-id").values(
            "id",
            "task__public_id",
            "kind",
            "error_type",
            "error_message",
            "attempts",
            "fingerprint",
            "created_at",
            "expire_at",
        )[: limit + 1]
    )
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_cursor = encode_cursor(rows[-1]["created_at"], rows[-1]["id"])
    return DeadLetterPage(rows=rows, next_cursor=next_cursor)
