"""Read-side queries for dead letters, the audit log and alerts (console and API call these).

Nothing here writes. Lists are keyset-paginated on (created_at, id): page N costs what page 1
costs, and no page counts the whole table (counts are capped).
"""

import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Max, Min, Q, QuerySet
from django.db.models.functions import Length, Substr, TruncHour
from django.utils import timezone

from deadletters.filters import DeadLetterFilters, filtered_dead_letters
from deadletters.models import Alert, AuditEntry, DeadLetter, DeadLetterStatus
from reports.kinds import KINDS

logger = logging.getLogger(__name__)

MAX_DB_ID = 2**63 - 1
COUNT_CAP = 1000
TRACEBACK_DISPLAY_CHARS = 200_000
SAMPLE_MESSAGE_CHARS = 300
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CURSOR_RE = re.compile(r"^(\d{1,19})-(\d{1,19})$")


def page_size() -> int:
    return getattr(settings, "CONSOLE_PAGE_SIZE", 50)


def traceback_display_chars() -> int:
    return getattr(settings, "CONSOLE_TRACEBACK_DISPLAY_CHARS", TRACEBACK_DISPLAY_CHARS)


# --- keyset pagination ----------------------------------------------------------


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
        match = _CURSOR_RE.match(raw or "")
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


def _after(cursor: Cursor, *, forward: bool, inclusive: bool = False) -> Q:
    """Rows past `cursor` in the (created_at, id) order: forward = ascending.

    The redundant `created_at >=/<=` bound lets the database start the index scan at the
    cursor; the OR alone makes PostgreSQL read and discard every row before it."""
    if forward:
        same = (
            Q(created_at=cursor.created_at, id__gte=cursor.id)
            if inclusive
            else Q(created_at=cursor.created_at, id__gt=cursor.id)
        )
        return Q(created_at__gte=cursor.created_at) & (Q(created_at__gt=cursor.created_at) | same)
    same = (
        Q(created_at=cursor.created_at, id__lte=cursor.id)
        if inclusive
        else Q(created_at=cursor.created_at, id__lt=cursor.id)
    )
    return Q(created_at__lte=cursor.created_at) & (Q(created_at__lt=cursor.created_at) | same)


def keyset_page(
    qs: QuerySet, *, cursor: Cursor | None, newest_first: bool = True, size: int | None = None
) -> KeysetPage:
    """One page of `qs` ordered by (created_at, id), after `cursor`; fetches size+1 rows, never counts.

    With a cursor, one more query of size+1 rows looks backwards for the previous page's cursor.
    """
    size = size or page_size()
    forward = not newest_first
    order = ("created_at", "id") if forward else ("-created_at", "-id")
    reverse = ("-created_at", "-id") if forward else ("created_at", "id")
    page_qs = qs.order_by(*order)
    if cursor:
        page_qs = page_qs.filter(_after(cursor, forward=forward))
    rows = list(page_qs[: size + 1])
    next_cursor = None
    if len(rows) > size:
        rows = rows[:size]
        last = rows[-1]
        next_cursor = Cursor(last.created_at, last.id).encode()
    prev_cursor = None
    if cursor:
        # The rows just before this page (the cursor row included), nearest first.
        before = list(
            qs.order_by(*reverse)
            .filter(_after(cursor, forward=not forward, inclusive=True))
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


# --- dead letters -------------------------------------------------------------


def dead_letter_page(filters: DeadLetterFilters, *, cursor: Cursor | None) -> KeysetPage:
    qs = (
        filtered_dead_letters(filters)
        .select_related("task", "task__batch")
        .defer("traceback", "params", "task__params", "task__last_error")
        .annotate(message_head=Substr("error_message", 1, SAMPLE_MESSAGE_CHARS))
        .defer("error_message")
    )
    return keyset_page(qs, cursor=cursor, newest_first=filters.sort != "oldest")


def newer_dead_letter_count(filters: DeadLetterFilters, *, cursor: Cursor) -> tuple[int, bool]:
    """How many letters matching `filters` arrived after `cursor` (the newest row on screen)."""
    qs = filtered_dead_letters(filters).filter(_after(cursor, forward=True))
    return capped_count(qs)


def dead_letter_count(filters: DeadLetterFilters) -> tuple[int, bool]:
    return capped_count(filtered_dead_letters(filters))


def filter_choices() -> dict:
    """Values the filter selects offer: kinds and error types seen among dead letters."""
    # DISTINCT over the whole table is a full scan at a million rows: computed once in a
    # while, not on every list page.
    return cache.get_or_set(
        "console:filter-choices", _filter_choices, settings.CONSOLE_FILTER_CHOICES_CACHE_SECONDS
    )


def _filter_choices() -> dict:
    kinds = sorted(
        set(KINDS) | set(DeadLetter.objects.order_by("kind").values_list("kind", flat=True).distinct()[:200])
    )
    error_types = list(
        DeadLetter.objects.order_by("error_type").values_list("error_type", flat=True).distinct()[:200]
    )
    return {"kinds": kinds, "error_types": error_types, "statuses": [*DeadLetterStatus.values, "all"]}


@dataclass
class FingerprintGroup:
    fingerprint: str
    count: int
    first_seen: datetime
    last_seen: datetime
    error_type: str = ""
    sample_message: str = ""
    sample_id: int | None = None
    kinds: list[str] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)


def fingerprint_groups(filters: DeadLetterFilters, *, limit: int = 200) -> list[FingerprintGroup]:
    """Dead letters matching `filters`, grouped by cause, biggest group first (GROUP BY in the DB)."""
    rows = list(
        filtered_dead_letters(filters)
        .order_by()
        .values("fingerprint")
        .annotate(
            n=Count("id"), first_seen=Min("created_at"), last_seen=Max("created_at"), latest_id=Max("id")
        )
        .order_by("-n", "-last_seen")[:limit]
    )
    if not rows:
        return []
    samples = {
        s["id"]: s
        for s in DeadLetter.objects.filter(pk__in=[r["latest_id"] for r in rows])
        .annotate(message_head=Substr("error_message", 1, SAMPLE_MESSAGE_CHARS))
        .values("id", "error_type", "message_head")
    }
    fingerprints = [r["fingerprint"] for r in rows]
    kinds: dict[str, list[str]] = {}
    for fp, kind in (
        filtered_dead_letters(filters)
        .filter(fingerprint__in=fingerprints)
        .order_by("fingerprint", "kind")
        .values_list("fingerprint", "kind")
        .distinct()
    ):
        kinds.setdefault(fp, []).append(kind)
    groups = []
    for r in rows:
        sample = samples.get(r["latest_id"], {})
        groups.append(
            FingerprintGroup(
                fingerprint=r["fingerprint"],
                count=r["n"],
                first_seen=r["first_seen"],
                last_seen=r["last_seen"],
                error_type=sample.get("error_type", ""),
                sample_message=sample.get("message_head", ""),
                sample_id=r["latest_id"],
                kinds=kinds.get(r["fingerprint"], []),
            )
        )
    return groups


def dead_letter_for_detail(letter_id: int) -> DeadLetter | None:
    """The letter with its traceback cut to TRACEBACK_DISPLAY_CHARS in the DB (a 10 MB one stays there)."""
    if letter_id > MAX_DB_ID:
        return None
    return (
        DeadLetter.objects.select_related("task", "task__batch", "replayed_in")
        .defer("traceback")
        .annotate(
            traceback_head=Substr("traceback", 1, traceback_display_chars()),
            traceback_length=Length("traceback"),
        )
        .filter(pk=letter_id)
        .first()
    )


def dead_letter_by_id(letter_id: int) -> DeadLetter | None:
    if letter_id > MAX_DB_ID:
        return None
    return DeadLetter.objects.filter(pk=letter_id).first()


def related_dead_letters(letter: DeadLetter, *, limit: int = 5) -> tuple[list[DeadLetter], int, bool]:
    """Other dead letters of the same cause: a few newest, and a capped count of all of them."""
    qs = DeadLetter.objects.filter(fingerprint=letter.fingerprint).exclude(pk=letter.pk)
    items = list(
        qs.select_related("task")
        .only("id", "status", "created_at", "kind", "task__public_id")
        .order_by("-created_at", "-id")[:limit]
    )
    count, capped = capped_count(qs)
    return items, count, capped


def newer_dead_letters_of_task(task_id: int, *, after_id: int) -> list[DeadLetter]:
    return list(
        DeadLetter.objects.filter(task_id=task_id, pk__gt=after_id)
        .only("id", "created_at", "error_type", "status")
        .order_by("-id")[:5]
    )


def task_attempts(task) -> list:
    """The attempt history, tracebacks cut short in the DB."""
    return list(
        task.attempts.defer("traceback")
        .annotate(traceback_head=Substr("traceback", 1, 20_000), traceback_length=Length("traceback"))
        .order_by("number")
    )


def alerts_for_dead_letter(letter: DeadLetter) -> list[Alert]:
    return list(letter.alerts.select_related("message").order_by("-created_at", "-id")[:50])


def audit_for_dead_letter(letter: DeadLetter, *, limit: int = 100) -> list[AuditEntry]:
    return list(
        AuditEntry.objects.filter(Q(dead_letter=letter) | Q(task_id=letter.task_id)).order_by(
            "-created_at", "-id"
        )[:limit]
    )


def audit_for_task(task, *, limit: int = 100) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(task=task).order_by("-created_at", "-id")[:limit])


# --- audit log ----------------------------------------------------------------


def audit_page(*, actor: str = "", action: str = "", cursor: Cursor | None = None) -> KeysetPage:
    qs = AuditEntry.objects.select_related("task", "dead_letter").defer(
        "task__params",
        "task__last_error",
        "dead_letter__traceback",
        "dead_letter__params",
        "dead_letter__error_message",
    )
    if actor:
        qs = qs.filter(actor=actor)
    if action:
        qs = qs.filter(action=action)
    return keyset_page(qs, cursor=cursor)


def audit_choices() -> dict:
    return {
        "actions": list(
            AuditEntry.objects.order_by("action").values_list("action", flat=True).distinct()[:100]
        ),
        "actors": list(AuditEntry.objects.order_by("actor").values_list("actor", flat=True).distinct()[:200]),
    }


# --- dashboard ----------------------------------------------------------------


def dead_letter_status_counts() -> dict[str, int]:
    counts = {status: 0 for status in DeadLetterStatus.values}
    for row in DeadLetter.objects.order_by().values("status").annotate(n=Count("id")):
        counts[row["status"]] = row["n"]
    return counts


def open_letters_overview(*, now: datetime | None = None) -> dict:
    """The oldest open dead letter and how many open ones the archiver takes within 24 h."""
    now = now or timezone.now()
    open_letters = DeadLetter.objects.filter(status=DeadLetterStatus.OPEN)
    oldest = open_letters.order_by("created_at", "id").values("id", "created_at").first()
    expiring, expiring_capped = capped_count(open_letters.filter(expire_at__lte=now + timedelta(hours=24)))
    return {"oldest": oldest, "expiring_24h": expiring, "expiring_capped": expiring_capped}


@dataclass
class Bucket:
    start: datetime
    count: int


def deaths_per_hour(*, hours: int, now: datetime | None = None) -> list[Bucket]:
    """Dead letters created per hour over the last `hours` hours, oldest first, empty hours as 0.

    GROUP BY TruncHour in the database; only one row per non-empty hour comes back.
    """
    now = now or timezone.now()
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    start = end - timedelta(hours=hours)
    rows = (
        DeadLetter.objects.filter(created_at__gte=start, created_at__lt=end)
        .annotate(hour=TruncHour("created_at", tzinfo=UTC))
        .order_by()
        .values("hour")
        .annotate(n=Count("id"))
    )
    by_hour = {}
    for row in rows:
        hour = row["hour"]
        if timezone.is_naive(hour):
            hour = timezone.make_aware(hour, UTC)
        by_hour[hour.astimezone(UTC)] = row["n"]
    start_utc = start.astimezone(UTC)
    return [
        Bucket(start=start_utc + timedelta(hours=i), count=by_hour.get(start_utc + timedelta(hours=i), 0))
        for i in range(hours)
    ]


def top_fingerprints(*, limit: int = 8) -> list[FingerprintGroup]:
    return fingerprint_groups(DeadLetterFilters(status=DeadLetterStatus.OPEN), limit=limit)


def rq_overview() -> dict:
    """Per queue: queued, scheduled, started, failed, deferred; workers alive. Never raises on a dead Redis."""
    from redis.exceptions import RedisError
    from rq import Queue, Worker

    from reports.queueing import redis_connection

    try:
        connection = redis_connection()
        queues = []
        for name in settings.REPORT_QUEUES:
            queue = Queue(name, connection=connection)
            queues.append(
                {
                    "name": name,
                    "queued": queue.count,
                    "scheduled": queue.scheduled_job_registry.count,
                    "started": queue.started_job_registry.count,
                    "failed": queue.failed_job_registry.count,
                    "deferred": queue.deferred_job_registry.count,
                }
            )
        workers = []
        for worker in Worker.all(connection=connection):
            workers.append(
                {
                    "name": worker.name,
                    "state": worker.get_state(),
                    "queues": ", ".join(worker.queue_names()),
                    "current_job": worker.get_current_job_id() or "",
                    "last_heartbeat": worker.last_heartbeat,
                    "successful": worker.successful_job_count,
                    "failed": worker.failed_job_count,
                }
            )
        workers.sort(key=lambda w: w["name"])
        return {"reachable": True, "queues": queues, "workers": workers, "error": ""}
    except (RedisError, OSError) as exc:
        return {
            "reachable": False,
            "queues": [],
            "workers": [],
            "error": f"{type(exc).__name__}: {exc}"[:300],
        }
    except Exception as exc:  # odd data in Redis must not turn the dashboard into a 500
        logger.exception("reading RQ state failed")
        return {"reachable": True, "queues": [], "workers": [], "error": f"{type(exc).__name__}: {exc}"[:300]}
