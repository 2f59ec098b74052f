"""One keyset paginator for every list (console pages and the JSON API).

Lists are ordered by (created_at, id). A cursor names the last row of a page as
`<microseconds since the epoch>-<id>`: page N costs what page 1 costs, no page counts the
whole table, and a cursor a client made up is refused (InvalidCursor), never a 500.
"""

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Q, QuerySet

MAX_DB_ID = 2**63 - 1  # a bigint primary key: larger values would be a database error, not "no match"
COUNT_CAP = 1000
DEFAULT_PAGE_SIZE = 50
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# ASCII digits only, the whole string (\d would take any script's digits; $ a trailing newline).
_CURSOR_RE = re.compile(r"([0-9]{1,19})-([0-9]{1,19})")


class InvalidCursor(ValueError):
    pass


@dataclass(frozen=True)
class Cursor:
    created_at: datetime
    id: int

    def encode(self) -> str:
        micros = (self.created_at - _EPOCH) // timedelta(microseconds=1)
        return f"{micros}-{self.id}"

    @classmethod
    def decode(cls, raw: str) -> "Cursor":
        match = _CURSOR_RE.fullmatch(raw or "")
        if not match:
            raise InvalidCursor(raw)
        micros, pk = int(match[1]), int(match[2])
        if pk > MAX_DB_ID:
            raise InvalidCursor(raw)
        try:
            created_at = _EPOCH + timedelta(microseconds=micros)
        except OverflowError:
            raise InvalidCursor(raw) from None
        if created_at.year > 9999:
            raise InvalidCursor(raw)
        return cls(created_at=created_at, id=pk)

    @classmethod
    def of(cls, row) -> "Cursor":
        return cls(row.created_at, row.id)


@dataclass
class KeysetPage:
    items: list
    next_cursor: str | None
    cursor: str | None
    # The cursor of the page before this one: "" when that is the first page, None on the first page.
    prev_cursor: str | None = None

    @property
    def has_next(self) -> bool:
        return self.next_cursor is not None

    @property
    def is_first(self) -> bool:
        return self.cursor is None

    @property
    def has_prev(self) -> bool:
        return self.prev_cursor is not None


def after(cursor: Cursor, *, forward: bool, inclusive: bool = False) -> Q:
    """Rows past `cursor` in the (created_at, id) order: forward = ascending.

    The redundant `created_at >=/<=` bound lets the database start the index scan at the
    cursor; the OR alone makes PostgreSQL read and discard every row before it."""
    if forward:
        same = Q(created_at=cursor.created_at, id__gte=cursor.id) if inclusive else Q(
            created_at=cursor.created_at, id__gt=cursor.id
        )
        return Q(created_at__gte=cursor.created_at) & (Q(created_at__gt=cursor.created_at) | same)
    same = Q(created_at=cursor.created_at, id__lte=cursor.id) if inclusive else Q(
        created_at=cursor.created_at, id__lt=cursor.id
    )
    return Q(created_at__lte=cursor.created_at) & (Q(created_at__lt=cursor.created_at) | same)


def keyset_page(
    qs: QuerySet,
    *,
    cursor: Cursor | None,
    newest_first: bool = True,
    size: int = DEFAULT_PAGE_SIZE,
    with_prev: bool = True,
) -> KeysetPage:
    """One page of `qs` ordered by (created_at, id), after `cursor`; fetches size+1 rows, never counts.

    With a cursor and `with_prev`, one more query of size+1 rows looks backwards for the
    previous page's cursor (the console's "newer" link; the API has no use for it)."""
    forward = not newest_first
    order = ("created_at", "id") if forward else ("-created_at", "-id")
    reverse = ("-created_at", "-id") if forward else ("created_at", "id")
    page_qs = qs.order_by(*order)
    if cursor:
        page_qs = page_qs.filter(after(cursor, forward=forward))
    rows = list(page_qs[: size + 1])
    next_cursor = None
    if len(rows) > size:
        rows = rows[:size]
        next_cursor = Cursor.of(rows[-1]).encode()
    prev_cursor = None
    if cursor and with_prev:
        # The rows just before this page (the cursor row included), nearest first.
        before = list(
            qs.order_by(*reverse)
            .filter(after(cursor, forward=not forward, inclusive=True))
            .values_list("created_at", "id")[: size + 1]
        )
        prev_cursor = Cursor(*before[size]).encode() if len(before) > size else ""
    return KeysetPage(
        items=rows,
        next_cursor=next_cursor,
        cursor=cursor.encode() if cursor else None,
        prev_cursor=prev_cursor,
    )


def capped_count(qs: QuerySet, cap: int = COUNT_CAP) -> tuple[int, bool]:
    """(count, capped): counts at most cap+1 rows (a LIMITed subquery), so it stays cheap."""
    n = qs.order_by()[: cap + 1].count()
    return (min(n, cap), n > cap)
