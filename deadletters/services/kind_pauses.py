"""Pausing and resuming a report kind, and its circuit breaker, as operator actions: the pipeline's
pause (reports.services.pausing) or breaker (reports.services.breakers) plus the audit entry, in
one transaction; and what this floor does when a breaker changes by itself."""

from django.db import transaction

from deadletters.alerts.outbox import notice
from deadletters.alerts.resolved import announce_kind_resumed
from deadletters.audit import REASON_MAX, record_audit
from deadletters.bulk.schedule import pause_replays_into
from reports.models import KindBreaker, PausedKind
from reports.services import breakers, pausing

PAST = {"open": "opened", "hold": "held", "close": "closed"}


def pause_kind(
    *, kind: object, actor: str, reason: str = "", source: str = "console", ip_address: str | None = None
) -> tuple[PausedKind, bool]:
    """Pause a kind. Returns (PausedKind, created); pausing a paused kind changes nothing and
    writes no audit entry. Raises InvalidParams for an unknown kind."""
    reason = (reason or "")[:REASON_MAX]
    with transaction.atomic():
        row, created = pausing.pause_kind(kind=kind, paused_by=actor, reason=reason)
        if created:
            record_audit(
                action="pause_kind",
                actor=actor,
                source=source,
                ip_address=ip_address,
                item_count=pausing.waiting_count(row.kind),
                reason=reason,
                details={"kind": row.kind},
            )
    return row, created


def resume_kind(*, kind: object, actor: str, source: str = "console", ip_address: str | None = None) -> int:
    """Resume a kind and enqueue its waiting tasks after commit (closing its breaker, if tripped).
    Returns how many were waiting. Raises KindNotPaused when it was not paused (a second click,
    another operator)."""
    with transaction.atomic():
        paused_at = PausedKind.objects.filter(kind=str(kind)).values_list("paused_at", flat=True).first()
        tripped = KindBreaker.objects.filter(kind=str(kind), state__in=breakers.TRIPPED).exists()
        closed = tripped and breakers.breaker_set(kind=kind, action="close", actor=actor)
        try:
            waiting = pausing.resume_kind(kind=kind)
        except pausing.KindNotPaused:
            if not closed:
                raise
            waiting = pausing.waiting_count(str(kind))
        record_audit(
            action="resume_kind",
            actor=actor,
            source=source,
            ip_address=ip_address,
            item_count=waiting,
            details={"kind": kind, **({"breaker": "closed"} if closed else {})},
        )
        if not closed:  # a closed breaker says so in its own card
            announce_kind_resumed(kind=str(kind), waiting=waiting, paused_at=paused_at)
    return waiting


def set_breaker(
    *, kind: object, action: str | None, actor: str, thresholds: dict | None = None, reason: str = "",
    source: str = "console", ip_address: str | None = None,
) -> tuple[KindBreaker, bool]:
    """An operator opens, holds or closes a kind's breaker and/or sets its thresholds, audited.
    Returns (the breaker, whether its state changed). Raises InvalidParams naming the field."""
    with transaction.atomic():
        changed = breakers.breaker_set(kind=kind, action=action, actor=actor, thresholds=thresholds)
        row = KindBreaker.objects.get(kind=kind)
        if changed or thresholds:
            record_audit(
                action=f"breaker_{PAST[action]}" if changed else "breaker_thresholds",
                actor=actor,
                source=source,
                ip_address=ip_address,
                item_count=pausing.waiting_count(row.kind),
                reason=(reason or "")[:REASON_MAX],
                details={"kind": row.kind, "state": row.state, "failures_to_open": row.failures_to_open,
                         "window_seconds": row.window_seconds, "probes_to_close": row.probes_to_close},
            )
    return row, changed


def breaker_changed(*, breaker: KindBreaker, change: str, actor: str, waiting: int) -> None:
    """A breaker changed (reports.signals.breaker_changed), in the transaction of the change: by
    itself, audited as the system; opened by itself or closed, one card; opened or held, the bulk
    replays into its kind paused (their replays would only wait)."""
    if not actor:
        record_audit(action=f"breaker_{change}", source="system", item_count=waiting,
                     details={"kind": breaker.kind, "failures": breaker.failures,
                              "passing_probes": breaker.passing_probes})
    if change == "closed" or (change == "opened" and not actor):
        notice({
            "notice": f"breaker_{change}", "kind": breaker.kind, "actor": actor, "waiting": waiting,
            "failures": breaker.failures, "window_seconds": breaker.window_seconds,
            "probes": breaker.probes_to_close,
            "opened_at": breaker.opened_at.isoformat() if breaker.opened_at else None,
            "changed_at": breaker.changed_at.isoformat() if breaker.changed_at else None,
        })
    if change != "closed":
        pause_replays_into(kind=breaker.kind)
