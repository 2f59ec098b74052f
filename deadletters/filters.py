"""The dead-letter list's filter state: query string -> typed, validated filter -> QuerySet.

Two public entry points other code relies on (the bulk actions run "on everything matching the
current filter" through them):

- `parse_dead_letter_filters(querydict)` returns a `DeadLetterFilters` or raises `InvalidFilter`
  with a message naming the parameter. A bad value is never silently widened into "everything".
- `filtered_dead_letters(filters)` returns a QuerySet of DeadLetter (unordered; callers order it).

Parameter names nobody knows (utm_source, the pagination cursor, ...) are ignored; values of the
known ones are checked.

Identifiers round-trip: what the console shows can be pasted back. `fingerprint` takes the full
40 hex characters or a prefix of at least 8 (the console shows 10 or 12) and matches every letter
whose fingerprint starts with it. The search box (`q`, also the API's) is `search_condition`.
"""

import re
import uuid
from dataclasses import asdict, dataclass
from datetime import date, datetime, time, timedelta
from urllib.parse import urlencode

from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from deadletters.models import DeadLetter, DeadLetterStatus
from reports.models import ReportTask
from reports.wording import status_word

DEFAULT_STATUS = DeadLetterStatus.OPEN.value
ALL_STATUSES = "all"
SORTS = ("newest", "oldest")
FILTER_PARAMS = (
    "status",
    "kind",
    "error_type",
    "fingerprint",
    "created_from",
    "created_to",
    "batch",
    "q",
    "sort",
)
FINGERPRINT_PREFIX_MIN = 8
_FINGERPRINT_RE = re.compile(rf"^[0-9a-f]{{{FINGERPRINT_PREFIX_MIN},40}}$")
_LETTER_ID_RE = re.compile(r"^#\s*([0-9]{1,18})$")
_TASK_PREFIX_RE = re.compile(r"^[0-9a-f][0-9a-f-]*$")
TASK_PREFIX_MIN = 8  # hex digits: the console shows the first 8 of a task id
TEXT_SEARCH_MIN = 3  # characters: a trigram index answers nothing shorter
TASK_PREFIX_CAP = 1000
_KIND_RE = re.compile(r"^[\w.:-]{1,64}$")
MAX_SEARCH_LENGTH = 200
MAX_ERROR_TYPE_LENGTH = 200
MIN_DATE = date(1970, 1, 1)
MAX_DATE = date(9000, 12, 31)


class InvalidFilter(ValueError):
    """A filter value that cannot be understood; the message names the parameter."""

    def __init__(self, param: str, message: str):
        self.param = param
        self.message = message
        super().__init__(f"{param}: {message}")


@dataclass(frozen=True)
class DeadLetterFilters:
    status: str = DEFAULT_STATUS  # a DeadLetterStatus value or "all"
    kind: str = ""
    error_type: str = ""
    fingerprint: str = ""
    created_from: date | None = None
    created_to: date | None = None
    batch: uuid.UUID | None = None
    q: str = ""
    sort: str = "newest"

    def as_params(self) -> dict[str, str]:
        """Only what differs from the defaults, as strings: the canonical, shareable form."""
        params = {}
        if self.status != DEFAULT_STATUS:
            params["status"] = self.status
        for name in ("kind", "error_type", "fingerprint", "q"):
            if getattr(self, name):
                params[name] = getattr(self, name)
        if self.created_from:
            params["created_from"] = self.created_from.isoformat()
        if self.created_to:
            params["created_to"] = self.created_to.isoformat()
        if self.batch:
            params["batch"] = str(self.batch)
        if self.sort != "newest":
            params["sort"] = self.sort
        return params

    def querystring(self, **overrides) -> str:
        """URL-encoded filter state (no leading '?'); overrides replace fields, None/'' drops them."""
        params = self.as_params()
        for key, value in overrides.items():
            if value in (None, ""):
                params.pop(key, None)
            else:
                params[key] = str(value)
        return urlencode(params)

    def as_json(self) -> dict:
        """JSON-serialisable (for BulkAction.filters); parse_dead_letter_filters() reads it back."""
        return self.as_params()

    @property
    def is_narrowed(self) -> bool:
        """True when something beyond status/sort narrows the list."""
        data = asdict(self)
        return any(
            data[name]
            for name in ("kind", "error_type", "fingerprint", "created_from", "created_to", "batch", "q")
        )


def _get(querydict, name: str) -> str:
    value = querydict.get(name, "")
    if isinstance(value, list):  # a plain dict of lists (e.g. parse_qs output)
        value = value[-1] if value else ""
    # NUL never belongs in a filter, and PostgreSQL refuses it in a query parameter.
    return str(value if value is not None else "").replace("\x00", "").strip()


def _parse_date(name: str, value: str) -> date | None:
    if not value:
        return None
    try:
        day = date.fromisoformat(value[:10]) if len(value) >= 10 else date.fromisoformat(value)
    except ValueError:
        raise InvalidFilter(name, _("%(value)r is not a date (YYYY-MM-DD)") % {"value": value[:40]}) from None
    if not (MIN_DATE <= day <= MAX_DATE):
        raise InvalidFilter(name, _("%(value)r is out of range") % {"value": value[:40]})
    return day


def parse_dead_letter_filters(querydict) -> DeadLetterFilters:
    """Read the filter parameters from a QueryDict (or a plain dict); raise InvalidFilter on bad values."""
    status = _get(querydict, "status") or DEFAULT_STATUS
    if status not in DeadLetterStatus.values and status != ALL_STATUSES:
        choices = ", ".join(status_word(value) for value in [*DeadLetterStatus.values, ALL_STATUSES])
        message = _("%(value)r is not one of %(choices)s") % {"value": status[:40], "choices": choices}
        raise InvalidFilter("status", message)

    kind = _get(querydict, "kind")
    if kind and not _KIND_RE.match(kind):
        raise InvalidFilter("kind", _("%(value)r is not a report kind") % {"value": kind[:40]})

    error_type = _get(querydict, "error_type")
    if len(error_type) > MAX_ERROR_TYPE_LENGTH:
        raise InvalidFilter("error_type", _("longer than %(n)d characters") % {"n": MAX_ERROR_TYPE_LENGTH})

    fingerprint = _get(querydict, "fingerprint").lower()
    if fingerprint and not _FINGERPRINT_RE.match(fingerprint):
        raise InvalidFilter(
            "fingerprint",
            _("%(value)r is not a fingerprint or the start of one (%(n)d to 40 hex characters)")
            % {"value": fingerprint[:50], "n": FINGERPRINT_PREFIX_MIN},
        )

    created_from = _parse_date("created_from", _get(querydict, "created_from"))
    created_to = _parse_date("created_to", _get(querydict, "created_to"))
    if created_from and created_to and created_from > created_to:
        raise InvalidFilter("created_from", _("is after created_to"))

    batch_raw = _get(querydict, "batch")
    batch = None
    if batch_raw:
        try:
            batch = uuid.UUID(batch_raw)
        except ValueError:
            message = _("%(value)r is not a batch id") % {"value": batch_raw[:50]}
            raise InvalidFilter("batch", message) from None

    q = _get(querydict, "q")
    if len(q) > MAX_SEARCH_LENGTH:
        raise InvalidFilter("q", _("search text longer than %(n)d characters") % {"n": MAX_SEARCH_LENGTH})

    sort = _get(querydict, "sort") or "newest"
    if sort not in SORTS:
        message = _("%(value)r is not one of %(choices)s") % {"value": sort[:40], "choices": ", ".join(SORTS)}
        raise InvalidFilter("sort", message)

    return DeadLetterFilters(
        status=status,
        kind=kind,
        error_type=error_type,
        fingerprint=fingerprint,
        created_from=created_from,
        created_to=created_to,
        batch=batch,
        q=q,
        sort=sort,
    )


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_current_timezone())


def filtered_dead_letters(filters: DeadLetterFilters) -> QuerySet:
    """Every DeadLetter matching `filters` (no ordering applied)."""
    qs = DeadLetter.objects.all()
    if filters.status != ALL_STATUSES:
        qs = qs.filter(status=filters.status)
    if filters.kind:
        qs = qs.filter(kind=filters.kind)
    if filters.error_type:
        qs = qs.filter(error_type=filters.error_type)
    if filters.fingerprint:
        qs = qs.filter(fingerprint_condition(filters.fingerprint))
    if filters.created_from:
        qs = qs.filter(created_at__gte=_day_start(filters.created_from))
    if filters.created_to:
        qs = qs.filter(created_at__lt=_day_start(filters.created_to + timedelta(days=1)))
    if filters.batch:
        qs = qs.filter(task__batch__public_id=filters.batch)
    if filters.q:
        qs = qs.filter(search_condition(filters.q))
    return qs


_CAUSE_RE = re.compile(r"^[0-9a-f]{8,40}$")


def hex_prefix_range(prefix: str, width: int) -> tuple[str, str]:
    """The inclusive range of `width`-digit hex strings starting with `prefix`."""
    return prefix.ljust(width, "0"), prefix.ljust(width, "f")


def fingerprint_condition(fingerprint: str) -> Q:
    """A full fingerprint, or every fingerprint starting with a prefix: a range on the
    fingerprint index (hex digits order the same in every collation)."""
    if len(fingerprint) == 40:
        return Q(fingerprint=fingerprint)
    low, high = hex_prefix_range(fingerprint, 40)
    return Q(fingerprint__gte=low, fingerprint__lte=high)


def search_condition(text: str) -> Q:
    """What the search box finds, each through an index on PostgreSQL:

    - `#13`: dead letter 13 (primary key), and nothing else;
    - a full task id (UUID): that task's letters (the task's unique index);
    - `13`: letter 13, or a message containing "13" (3+ digits);
    - a task-id prefix of 8+ hex digits (what the list shows): letters of the tasks whose id starts
      with it (a range on the task id's unique index; a UUID orders by its bytes, and so by its
      hex digits), or a message containing it;
    - a cause id (fingerprint) or a prefix of 8+ hex digits of one (what the pages show): its letters;
    - anything else of 3+ characters: a case-insensitive piece of the error message (the trigram
      index of migration 0003; a scan on SQLite).
    Shorter text that is no id finds nothing."""
    text = text.strip()
    letter = _LETTER_ID_RE.match(text)
    if letter:
        return Q(pk=int(letter[1]))
    try:
        task_id = uuid.UUID(text)
    except ValueError:
        pass
    else:
        # Resolved to the task's row id first: the letters' task_id index then answers, where a
        # join on the task's UUID let PostgreSQL walk every open letter newest first (0.7 s at 1M).
        return Q(task_id__in=list(ReportTask.objects.filter(public_id=task_id).values_list("pk", flat=True)))
    conditions = []
    if text.isascii() and text.isdigit() and len(text) < 19:  # "¹".isdigit() is true too
        conditions.append(Q(pk=int(text)))
    compact = text.lower().replace("-", "")
    if _TASK_PREFIX_RE.match(text.lower()) and TASK_PREFIX_MIN <= len(compact) <= 32:
        conditions.append(Q(task_id__in=_task_ids_with_prefix(compact)))
    if _CAUSE_RE.match(text.lower()):
        conditions.append(fingerprint_condition(text.lower()))
    if len(text) >= TEXT_SEARCH_MIN:
        conditions.append(Q(error_message__icontains=text))
    if not conditions:
        return Q(pk__in=[])
    found = conditions[0]
    for condition in conditions[1:]:
        found |= condition
    return found


def _task_ids_with_prefix(prefix: str) -> list[int]:
    # Resolved first, so the letters' own task_id index can join an OR with the other
    # conditions (an OR across two tables would make PostgreSQL scan).
    low, high = hex_prefix_range(prefix, 32)
    return list(
        ReportTask.objects.filter(public_id__gte=uuid.UUID(low), public_id__lte=uuid.UUID(high))
        .order_by()
        .values_list("pk", flat=True)[:TASK_PREFIX_CAP]
    )
