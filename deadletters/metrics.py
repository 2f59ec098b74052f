"""What /metrics reads of the dead-letter side: open letters by kind and by cause (the few rows of
OpenLetterCount, kept by triggers) and bulk runs by state (the alert outbox: alerts/health.py)."""

from dataclasses import dataclass

from django.db.models import Count

from deadletters.models import BulkAction, OpenLetterCount

OTHER = "other"


@dataclass(frozen=True)
class OpenLetters:
    by_kind: dict[str, int]
    # (fingerprint, error type) -> open letters, for the top causes, and (OTHER, OTHER) for the rest.
    by_cause: dict[tuple[str, str], int]


def open_letters(*, top_causes: int) -> OpenLetters:
    """Open letters by kind, and by cause for the `top_causes` largest causes (the rest summed as
    "other", so the label's values stay bounded however many causes there are)."""
    rows = OpenLetterCount.objects.filter(count__gt=0).values_list(
        "kind", "fingerprint", "error_type", "count")
    by_kind: dict[str, int] = {}
    by_fingerprint: dict[str, int] = {}
    error_types: dict[str, str] = {}
    for kind, fingerprint, error_type, n in rows:
        by_kind[kind] = by_kind.get(kind, 0) + n
        by_fingerprint[fingerprint] = by_fingerprint.get(fingerprint, 0) + n
        error_types[fingerprint] = error_type
    ranked = sorted(by_fingerprint.items(), key=lambda item: (-item[1], item[0]))
    top, rest = ranked[:top_causes], ranked[top_causes:]
    by_cause = {(fingerprint, error_types[fingerprint]): n for fingerprint, n in top}
    if rest:
        by_cause[(OTHER, OTHER)] = sum(n for _, n in rest)
    return OpenLetters(by_kind=by_kind, by_cause=by_cause)


def bulk_runs_by_state() -> list[tuple[str, str, int]]:
    """(action, status, runs) of bulk dead-letter actions."""
    rows = BulkAction.objects.order_by().values_list("action", "status").annotate(n=Count("pk"))
    return [(action, status, n) for action, status, n in rows]
