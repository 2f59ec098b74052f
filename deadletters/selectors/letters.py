"""Read-side queries about dead letters (console and API call these; nothing here writes).

Lists are keyset-paginated on (created_at, id) by config.keyset; counts are capped."""

from dataclasses import dataclass, field, replace
from datetime import datetime

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Max, Min, QuerySet
from django.db.models.functions import Length, Substr
from django.utils import timezone

from config.keyset import MAX_DB_ID, Cursor, KeysetPage, after, capped_count, keyset_page
from deadletters.filters import (
    ALL_STATUSES,
    DeadLetterFilters,
    filtered_dead_letters,
    fingerprint_condition,
    search_condition,
)
from deadletters.models import Alert, DeadLetter, DeadLetterStatus
from deadletters.selectors.trends import CauseTrend, attach_trends
from reports.kinds import KINDS

# Tracebacks longer than this are cut on the detail page (the full text is one click away).
TRACEBACK_DISPLAY_CHARS = 200_000

# The filter drop-downs' choices (table-wide aggregates) are shared between requests this long.
FILTER_CHOICES_CACHE_SECONDS = 300

SAMPLE_MESSAGE_CHARS = 300
GROUPS_LIMIT = 200  # causes a groups page or answer shows, biggest first
ERROR_MESSAGE_PREVIEW = 300


def dead_letter_page(filters: DeadLetterFilters, *, cursor: Cursor | None) -> KeysetPage:
    qs = (
        filtered_dead_letters(filters)
        .select_related("task", "task__batch", "superseded_by")
        .defer("traceback", "params", "task__params", "task__last_error", "superseded_by__params",
               "superseded_by__last_error")
        .annotate(message_head=Substr("error_message", 1, SAMPLE_MESSAGE_CHARS))
        .defer("error_message")
    )
    return keyset_page(
        qs, cursor=cursor, newest_first=filters.sort != "oldest", size=settings.CONSOLE_PAGE_SIZE
    )


def newer_dead_letter_count(filters: DeadLetterFilters, *, cursor: Cursor) -> tuple[int, bool]:
    """How many letters matching `filters` arrived after `cursor` (the newest row on screen)."""
    qs = filtered_dead_letters(filters).filter(after(cursor, forward=True))
    return capped_count(qs)


def dead_letter_count(filters: DeadLetterFilters) -> tuple[int, bool]:
    return capped_count(filtered_dead_letters(filters))


def filter_choices() -> dict:
    """Values the filter selects offer: kinds and error types seen among dead letters."""
    # DISTINCT over the whole table is a full scan at a million rows: computed once in a
    # while, not on every list page.
    return cache.get_or_set(
        "console:filter-choices", _filter_choices, FILTER_CHOICES_CACHE_SECONDS
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
    trend: CauseTrend | None = None  # set by deadletters.selectors.trends.attach_trends


def fingerprint_groups(filters: DeadLetterFilters, *, limit: int = GROUPS_LIMIT) -> list[FingerprintGroup]:
    """Dead letters matching `filters`, grouped by cause, biggest group first (GROUP BY in the DB)."""
    return groups_of_letters(filtered_dead_letters(filters), limit=limit)


def fingerprint_groups_with_trends(
    filters: DeadLetterFilters, *, limit: int = GROUPS_LIMIT, now: datetime | None = None
) -> list[FingerprintGroup]:
    """The groups page: fingerprint_groups, each with its deaths per hour and trend. The deaths
    are counted under the same filters except the status (a replayed letter still was a death)."""
    groups = fingerprint_groups(filters, limit=limit)
    return attach_trends(groups, filtered_dead_letters(replace(filters, status=ALL_STATUSES)), now=now)


def superseded_apart(filters: DeadLetterFilters) -> tuple[int, bool] | None:
    """The superseded letters a list (or the groups) of open ones leaves out, counted (capped); None
    for other lists."""
    if filters.status != DeadLetterStatus.OPEN:
        return None
    return capped_count(filtered_dead_letters(replace(filters, status=DeadLetterStatus.SUPERSEDED)))


def groups_of_letters(letters: QuerySet, *, limit: int = GROUPS_LIMIT) -> list[FingerprintGroup]:
    """`letters` (a DeadLetter QuerySet) grouped by cause, biggest group first: each group's count,
    first and last death, kinds, and the error type and message of its newest letter."""
    rows = list(
        letters.order_by()
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
        letters.filter(fingerprint__in=fingerprints)
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
            traceback_head=Substr("traceback", 1, TRACEBACK_DISPLAY_CHARS),
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


def cause_sample(fingerprint: str) -> tuple[str, str] | None:
    """How an operator recognises a cause (a full fingerprint or a prefix of one): the error type
    and the start of the message of its newest letter; None when no letter has it."""
    return (
        DeadLetter.objects.filter(fingerprint_condition(fingerprint))
        .order_by("-pk")
        .values_list("error_type", Substr("error_message", 1, SAMPLE_MESSAGE_CHARS))
        .first()
    )


def open_count_of_cause(fingerprint: str) -> tuple[int, bool]:
    """Open dead letters of one cause (capped): the number the dashboard and the groups show."""
    return capped_count(DeadLetter.objects.filter(fingerprint=fingerprint, status=DeadLetterStatus.OPEN))


def newer_dead_letters_of_task(task_id: int, *, after_id: int) -> list[DeadLetter]:
    return list(
        DeadLetter.objects.filter(task_id=task_id, pk__gt=after_id)
        .only("id", "created_at", "error_type", "status")
        .order_by("-id")[:5]
    )


def alerts_for_dead_letter(letter: DeadLetter) -> list[Alert]:
    return list(letter.alerts.select_related("message").order_by("-created_at", "-id")[:50])


# --- the API's list: open, not yet expired, newest first ------------------------------


def client_dead_letters(
    *, kind: str | None = None, fingerprint: str | None = None, q: str = "", owner=None
) -> QuerySet:
    """The API's filter over dead letters of every status: `fingerprint` (or its start) and the
    search `q` work as the console's. `owner` (an ApiToken) keeps only the letters of that client's
    tasks; None keeps everyone's."""
    qs = DeadLetter.objects.all()
    if owner is not None:
        qs = qs.filter(task__owner=owner)
    if kind:
        qs = qs.filter(kind=kind)
    if fingerprint:
        qs = qs.filter(fingerprint_condition(fingerprint))
    if q:
        qs = qs.filter(search_condition(q))
    return qs


def open_unexpired(letters: QuerySet) -> QuerySet:
    """What the API lists: open letters the archiver has not yet come for."""
    return letters.filter(status=DeadLetterStatus.OPEN, expire_at__gt=timezone.now())


def client_fingerprint_groups(
    *,
    kind: str | None = None,
    fingerprint: str | None = None,
    q: str = "",
    owner=None,
    limit: int = GROUPS_LIMIT,
    now: datetime | None = None,
) -> list[FingerprintGroup]:
    """The API's groups: its list's letters (open, not expired, filtered as client_dead_letters)
    grouped by cause, each with the trend of the same client's deaths of every status."""
    letters = client_dead_letters(kind=kind, fingerprint=fingerprint, q=q, owner=owner)
    return attach_trends(groups_of_letters(open_unexpired(letters), limit=limit), letters, now=now)


def open_dead_letters_page(
    *,
    kind: str | None = None,
    fingerprint: str | None = None,
    q: str = "",
    cursor: Cursor | None = None,
    limit: int = 50,
    owner=None,
    superseded: bool = False,
) -> KeysetPage:
    """The API's list: open, not expired (`superseded`: the superseded ones), newest first, filtered
    as client_dead_letters."""
    letters = client_dead_letters(kind=kind, fingerprint=fingerprint, q=q, owner=owner)
    qs = letters.filter(status=DeadLetterStatus.SUPERSEDED) if superseded else open_unexpired(letters)
    qs = qs.select_related("task", "superseded_by").only(
        "status",
        "superseded_by__public_id",
        "id",
        "task__public_id",
        "kind",
        "error_type",
        "error_message",
        "attempts",
        "fingerprint",
        "created_at",
        "expire_at",
    )
    return keyset_page(qs, cursor=cursor, size=limit, with_prev=False)


def message_preview(message: str) -> str:
    """The first line of an error message, at most ERROR_MESSAGE_PREVIEW characters."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    return first if len(first) <= ERROR_MESSAGE_PREVIEW else first[: ERROR_MESSAGE_PREVIEW - 1] + "…"
