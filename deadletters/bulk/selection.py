"""What a bulk action touches: the operator's ticked ids, or "everything matching this filter"
snapshotted at the highest dead-letter id seen, so letters that die later are never included.
Superseded letters (a later task made them moot) are left out unless `include_superseded` asks
for them. Also the dry-run preview (count and a sample)."""

from dataclasses import dataclass, replace

from django.db.models import F, Max, QuerySet
from django.http import QueryDict
from django.utils.translation import gettext as _

from config.keyset import MAX_DB_ID
from deadletters.filters import (
    DeadLetterFilters,
    InvalidFilter,
    filtered_dead_letters,
    parse_dead_letter_filters,
)
from deadletters.models import BulkAction, BulkActionKind, DeadLetter, DeadLetterStatus
from deadletters.services.letters import REPLAYABLE_STATUSES
from deadletters.services.transitions import ARCHIVABLE_STATUSES, DISCARDABLE_STATUSES, RESTORABLE_STATUSES
from reports.models import TaskStatus

# Ticked rows per bulk action; Django refuses forms of more than 1,000 fields anyway.
SELECTION_MAX = 1000

SCOPE_SELECTED = "selected"
SCOPE_FILTER = "filter"
SCOPES = (SCOPE_SELECTED, SCOPE_FILTER)
SAMPLE_SIZE = 10
# Which letters each action can touch: the preview counts and the runner walks these.
ELIGIBLE_STATUSES = {
    "replay": REPLAYABLE_STATUSES,
    "archive": ARCHIVABLE_STATUSES,
    "discard": DISCARDABLE_STATUSES,
    "restore": RESTORABLE_STATUSES,
}


class InvalidBulkRequest(ValueError):
    """`field` names what is wrong, `message` says how (in the language active where it is raised);
    for a bad filter, `filter_error` is the filter's own InvalidFilter."""

    def __init__(self, field: str, message: str, *, filter_error: InvalidFilter | None = None):
        self.field = field
        self.message = message
        self.filter_error = filter_error
        super().__init__(f"{field}: {message}")


class BulkRequestConflict(InvalidBulkRequest):
    """Well-formed, but refused for what is true now: a canary larger than what the selection
    holds, a start time that has passed or is too far ahead. The API answers 409 for these."""


@dataclass(frozen=True)
class Selection:
    """What a bulk action touches, as stored in BulkAction.filters / selected_ids."""

    action: str
    scope: str
    ids: tuple[int, ...] = ()
    filters: DeadLetterFilters | None = None
    max_id: int = 0
    include_superseded: bool = False

    @property
    def statuses(self) -> list[str]:
        """The states of the letters it acts on: the action's, superseded ones only when asked for."""
        skipped = () if self.include_superseded else (DeadLetterStatus.SUPERSEDED,)
        return [status for status in ELIGIBLE_STATUSES[self.action] if status not in skipped]

    def queryset(self) -> QuerySet:
        """The letters this selection can still act on, unordered."""
        if self.scope == SCOPE_SELECTED:
            # Small by construction (SELECTION_MAX); the runner walks `ids` itself.
            qs = DeadLetter.objects.filter(pk__in=self.ids)
        else:
            qs = filtered_dead_letters(self.filters).filter(pk__lte=self.max_id)
        return qs.filter(status__in=self.statuses)

    def as_filters_json(self) -> dict:
        data = {"scope": self.scope, "max_id": self.max_id}
        if self.include_superseded:
            data["include_superseded"] = True
        if self.filters is not None:
            data["filter"] = self.filters.as_json()
        return data


def build_selection(
    *, action: object, scope: object, ids: list | tuple = (), filter_qs: object = "", max_id: object = None,
    include_superseded: bool = False,
) -> Selection:
    """Validate what the list form posted. Raises InvalidBulkRequest naming the field."""
    if action not in BulkActionKind.values:
        choices = ", ".join(BulkActionKind.values)
        raise InvalidBulkRequest("action", _("must be one of %(choices)s") % {"choices": choices})
    if scope not in SCOPES:
        raise InvalidBulkRequest("scope", _("must be one of %(choices)s") % {"choices": ", ".join(SCOPES)})
    current_max = DeadLetter.objects.aggregate(m=Max("pk"))["m"] or 0
    cap = current_max
    if max_id not in (None, ""):
        # The preview's snapshot: start acts on what the operator saw, never on later deaths.
        cap = min(_positive_id(max_id, "max_id", _("must be a dead-letter id")), current_max)
    if scope == SCOPE_SELECTED:
        parsed = sorted({_positive_id(i, "ids", _("must be dead-letter ids")) for i in ids})
        if not parsed:
            raise InvalidBulkRequest("ids", _("select at least one dead letter"))
        if len(parsed) > SELECTION_MAX:
            raise InvalidBulkRequest(
                "ids",
                _("at most %(n)d at once; use 'everything matching the filter'") % {"n": SELECTION_MAX},
            )
        return Selection(action=action, scope=scope, ids=tuple(parsed), max_id=cap,
                         include_superseded=include_superseded)
    if not isinstance(filter_qs, str):
        raise InvalidBulkRequest("filter_qs", _("must be a query string"))
    try:
        filters = parse_dead_letter_filters(QueryDict(filter_qs.lstrip("?")))
    except InvalidFilter as exc:
        raise InvalidBulkRequest("filter_qs", str(exc), filter_error=exc) from None
    return Selection(action=action, scope=scope, filters=filters, max_id=cap,
                     include_superseded=include_superseded)


def _positive_id(value: object, field: str, message: str) -> int:
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise InvalidBulkRequest(field, message) from None
    if not 0 <= number <= MAX_DB_ID or (field == "ids" and number == 0):
        raise InvalidBulkRequest(field, message)
    return number


def selection_of(bulk: BulkAction) -> Selection:
    stored = bulk.filters or {}
    common = {"action": bulk.action, "max_id": int(stored.get("max_id") or 0),
              "include_superseded": bool(stored.get("include_superseded"))}
    if stored.get("scope") == SCOPE_SELECTED:
        return Selection(scope=SCOPE_SELECTED, ids=tuple(bulk.selected_ids or ()), **common)
    filters = parse_dead_letter_filters(stored.get("filter") or {})
    return Selection(scope=SCOPE_FILTER, filters=filters, **common)


@dataclass(frozen=True)
class BulkPreview:
    selection: Selection
    count: int
    sample: list[DeadLetter]
    # Of `count`, the letters that died of a permanent error (DeadLetter.died_without_retry):
    # replayed unchanged, they are expected to die the same way. Counted for a replay only.
    permanent: int = 0
    superseded: int = 0  # left out for being superseded (a replay without include_superseded)


def preview_bulk_action(*, selection: Selection) -> BulkPreview:
    """Dry run: how many letters the action would touch now, and the first SAMPLE_SIZE of them."""
    qs = selection.queryset()
    sample = list(qs.select_related("task").order_by("pk")[:SAMPLE_SIZE])
    permanent = 0
    if selection.action == BulkActionKind.REPLAY:
        permanent = qs.filter(task__status=TaskStatus.DEAD, attempts=F("task__attempt"),
                              task__attempt__lt=F("task__max_attempts")).count()
    superseded = 0
    if selection.action == BulkActionKind.REPLAY and not selection.include_superseded:
        superseded = replace(selection, include_superseded=True).queryset().filter(
            status=DeadLetterStatus.SUPERSEDED).count()
    return BulkPreview(selection=selection, count=qs.count(), sample=sample, permanent=permanent,
                       superseded=superseded)
