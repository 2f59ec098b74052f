"""Pausing and resuming a report kind as an operator action: the pipeline's pause
(reports.services.pausing) plus its audit entry, in one transaction."""

from django.db import transaction

from deadletters.alerts.resolved import announce_kind_resumed
from deadletters.audit import REASON_MAX, record_audit
from reports.models import PausedKind
from reports.services import pausing


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
    """Resume a kind and enqueue its waiting tasks after commit. Returns how many were waiting.

    Raises KindNotPaused when it was not paused (a second click, another operator)."""
    with transaction.atomic():
        paused_at = PausedKind.objects.filter(kind=str(kind)).values_list("paused_at", flat=True).first()
        waiting = pausing.resume_kind(kind=kind)
        record_audit(
            action="resume_kind",
            actor=actor,
            source=source,
            ip_address=ip_address,
            item_count=waiting,
            details={"kind": kind},
        )
        announce_kind_resumed(kind=str(kind), waiting=waiting, paused_at=paused_at)
    return waiting
