"""An operator's control of a bulk action: start it (audited once, with its item count), pause,
resume, cancel it and change its rate. Each change is one conditional UPDATE of the BulkAction row; the runner
(deadletters.bulk.runner) notices at its next batch boundary."""

import logging
import math
import uuid
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from deadletters.audit import REASON_MAX, record_audit, require_reason
from deadletters.bulk.patch import parse_params_patch
from deadletters.bulk.pause_reasons import paused_by
from deadletters.bulk.plans import check_canary_fits, check_start_at, validate_canary, validate_canary_success
from deadletters.bulk.selection import SCOPE_SELECTED, InvalidBulkRequest, Selection
from deadletters.models import BulkAction, BulkActionKind, BulkActionStatus, CanaryPhase
from reports.wording import status_word
from transport.queues import enqueue_job

logger = logging.getLogger("deadletters.bulk")

BULK_JOB_FUNC = "deadletters.bulk.jobs.run_bulk_action_job"
# Slowest allowed rate: one item every 10 s keeps a batch well inside the runner lock.
MIN_RATE = 0.1
ACTIVE_STATUSES = (
    BulkActionStatus.SCHEDULED,
    BulkActionStatus.PENDING,
    BulkActionStatus.RUNNING,
    BulkActionStatus.CANARY,
    BulkActionStatus.PAUSED,
)
FINISHED_STATUSES = (
    BulkActionStatus.COMPLETED,
    BulkActionStatus.CANCELLED,
    BulkActionStatus.FAILED,
    BulkActionStatus.CANARY_FAILED,
)


class BulkStateConflict(Exception):
    """Pause/resume/cancel/a rate change asked of a bulk action in a state that does not allow it.
    The message is in the language active where it is raised."""

    def __init__(self, bulk: BulkAction, action: str):
        self.bulk = bulk
        self.action = action
        sentences = {
            "pause": _("cannot pause a bulk action that is %(status)s"),
            "resume": _("cannot resume a bulk action that is %(status)s"),
            "cancel": _("cannot cancel a bulk action that is %(status)s"),
        }
        sentence = sentences.get(action) or _("cannot change the rate of a bulk action that is %(status)s")
        super().__init__(sentence % {"status": status_word(bulk.status)})


def validate_rate(value: object) -> float:
    if value in (None, ""):
        return float(settings.BULK_ACTION_RATE_PER_SECOND)
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise InvalidBulkRequest("rate_per_second", _("must be a number")) from None
    if not math.isfinite(rate) or not MIN_RATE <= rate <= settings.BULK_ACTION_MAX_RATE:
        raise InvalidBulkRequest(
            "rate_per_second",
            _("must be between %(minimum)s and %(maximum)s per second")
            % {"minimum": MIN_RATE, "maximum": settings.BULK_ACTION_MAX_RATE},
        )
    return rate


def validate_threshold(value: object) -> float:
    if value in (None, ""):
        return float(settings.BULK_REPLAY_PAUSE_THRESHOLD)
    try:
        threshold = float(value)
    except (TypeError, ValueError):
        raise InvalidBulkRequest("pause_threshold", _("must be a number between 0 and 1")) from None
    if not math.isfinite(threshold) or not 0 <= threshold <= 1:
        raise InvalidBulkRequest("pause_threshold", _("must be between 0 and 1"))
    return threshold


def start_bulk_action(
    *,
    selection: Selection,
    actor: str,
    ip_address: str | None,
    reason: str = "",
    rate_per_second: float | None = None,
    pause_threshold: float | None = None,
    request_token: str | None = None,
    canary: object = None,
    canary_success: object = None,
    start_at: datetime | None = None,
    source: str = "console",
    params_patch: object = None,
    after_breaker_of: str = "",
) -> tuple[BulkAction, bool]:
    """Create the BulkAction (pending, or scheduled when `start_at` is given or it waits for the
    breaker of a kind, `after_breaker_of`, checked by schedule.start_after_breaker), audit it once
    with its item count, and enqueue its job on commit (a scheduled one's when it is due: schedule.py).

    `canary` k > 0 makes a replay stop after its first k replays until their outcome decides
    (canary.py): at least `canary_success` of them done, and it carries on by itself.
    `params_patch` (a replay's; deadletters.bulk.patch) edits the params of every task it replays.
    `request_token` (a UUID the preview form carries) becomes the bulk's public_id, so a form sent
    twice starts one bulk: the second call returns the first bulk and created=False.
    """
    if selection.action != BulkActionKind.RESTORE:
        require_reason(action=f"bulk {selection.action}", reason=reason)
    plan = {
        "rate": validate_rate(rate_per_second),
        "threshold": validate_threshold(pause_threshold),
        "canary": validate_canary(canary, action=selection.action),
        "canary_success": validate_canary_success(canary_success),
        "start_at": check_start_at(start_at) if start_at is not None else None,
        "patch": parse_params_patch(params_patch, action=selection.action),
        "after_breaker_of": after_breaker_of,
    }
    public_id = _token_uuid(request_token)
    existing = BulkAction.objects.filter(public_id=public_id).first()
    if existing is not None:
        return existing, False
    try:
        bulk = _create_bulk(selection, actor, ip_address, reason, plan, public_id, source)
    except IntegrityError:
        existing = BulkAction.objects.filter(public_id=public_id).first()
        if existing is None:
            raise
        return existing, False
    logger.info("bulk %s %s started by %s: %s letters", bulk.action, bulk.public_id, actor, bulk.total)
    return bulk, True


def _token_uuid(token: str | None) -> uuid.UUID:
    try:
        return uuid.UUID(str(token)) if token else uuid.uuid4()
    except ValueError:
        return uuid.uuid4()


def _create_bulk(selection, actor, ip_address, reason, plan, public_id, source) -> BulkAction:
    replay = selection.action == BulkActionKind.REPLAY
    with transaction.atomic():
        total = selection.queryset().count()
        waits = plan["start_at"] or plan["after_breaker_of"]
        if plan["canary"]:
            check_canary_fits(plan["canary"], total)
        bulk = BulkAction.objects.create(
            public_id=public_id,
            action=selection.action,
            status=BulkActionStatus.SCHEDULED if waits else BulkActionStatus.PENDING,
            filters=selection.as_filters_json(),
            selected_ids=list(selection.ids) if selection.scope == SCOPE_SELECTED else None,
            actor=actor[:150],
            ip_address=ip_address,
            source=source,
            reason=reason[:REASON_MAX],
            total=total,
            rate_per_second=plan["rate"],
            pause_threshold=plan["threshold"] if replay else 0,
            start_at=plan["start_at"],
            after_breaker_of=plan["after_breaker_of"],
            canary_size=plan["canary"],
            canary_success=plan["canary_success"] if plan["canary"] else 0,
            canary_phase=CanaryPhase.PENDING if plan["canary"] else CanaryPhase.NONE,
            params_patch=plan["patch"],
        )
        record_audit(
            action=f"bulk_{selection.action}",
            actor=actor,
            source=source,
            ip_address=ip_address,
            item_count=total,
            reason=reason,
            details={
                "bulk": str(bulk.public_id),
                "scope": selection.scope,
                **({"filter": selection.filters.as_json()} if selection.filters is not None else {}),
                **({"ids": list(selection.ids)[:1000]} if selection.scope == SCOPE_SELECTED else {}),
                "max_id": selection.max_id,
                "rate_per_second": plan["rate"],
                **({"pause_threshold": plan["threshold"]} if replay else {}),
                **({"start_at": plan["start_at"].isoformat()} if plan["start_at"] else {}),
                **({"after_breaker_of": plan["after_breaker_of"]} if plan["after_breaker_of"] else {}),
                **(
                    {"canary": plan["canary"], "canary_success": plan["canary_success"]}
                    if plan["canary"]
                    else {}
                ),
                **({"params_patch": plan["patch"]} if plan["patch"] else {}),
            },
        )
        if not waits:
            enqueue_after_commit(bulk.pk)
    return bulk


def enqueue_bulk_job(bulk_id: int) -> str:
    job_id = f"bulk-{bulk_id}-{uuid.uuid4().hex[:12]}"
    return enqueue_job(
        BULK_JOB_FUNC,
        queue="default",
        job_id=job_id,
        args=(bulk_id,),
        timeout=settings.BULK_ACTION_SLICE_SECONDS + settings.BULK_ACTION_LOCK_SECONDS + 120,
        description=f"bulk action {bulk_id}",
    )


def enqueue_after_commit(bulk_id: int) -> None:
    # robust: if Redis is down at commit, the housekeeper (stalled bulk actions) enqueues it later.
    transaction.on_commit(lambda: enqueue_bulk_job(bulk_id), robust=True)


def _operator_change(
    *, bulk_id: int, action: str, actor: str, ip_address: str | None, from_statuses, updates
):
    with transaction.atomic():
        changed = BulkAction.objects.filter(pk=bulk_id, status__in=from_statuses).update(
            updated_at=timezone.now(), **updates
        )
        bulk = BulkAction.objects.get(pk=bulk_id)
        if not changed:
            raise BulkStateConflict(bulk, action)
        record_audit(
            action=f"bulk_{action}",
            actor=actor,
            ip_address=ip_address,
            item_count=max(bulk.total - bulk.processed, 0),
            details={"bulk": str(bulk.public_id), "bulk_action": bulk.action},
        )
    return bulk


def pause_bulk_action(*, bulk_id: int, actor: str, ip_address: str | None = None) -> BulkAction:
    """pending/running -> paused; the runner stops at its next batch boundary."""
    return _operator_change(
        bulk_id=bulk_id,
        action="pause",
        actor=actor,
        ip_address=ip_address,
        from_statuses=(BulkActionStatus.PENDING, BulkActionStatus.RUNNING),
        updates={"status": BulkActionStatus.PAUSED, "paused_reason": paused_by(actor)[:REASON_MAX]},
    )


def resume_bulk_action(*, bulk_id: int, actor: str, ip_address: str | None = None) -> BulkAction:
    """paused/failed -> pending and a new job; the cursor makes it carry on where it stopped.

    The died-again watch restarts from now: the operator resumes because the cause is fixed,
    so deaths from before the resume must not pause it again at once.
    """
    with transaction.atomic():
        bulk = BulkAction.objects.filter(pk=bulk_id).first()
        if bulk is None:
            raise BulkAction.DoesNotExist(bulk_id)
        filters = dict(bulk.filters or {}, watch_since=timezone.now().isoformat())
        bulk = _operator_change(
            bulk_id=bulk_id,
            action="resume",
            actor=actor,
            ip_address=ip_address,
            from_statuses=(BulkActionStatus.PAUSED, BulkActionStatus.FAILED),
            updates={
                "status": BulkActionStatus.PENDING,
                "paused_reason": "",
                "error": "",
                "filters": filters,
            },
        )
        enqueue_after_commit(bulk.pk)
    return bulk


def cancel_bulk_action(*, bulk_id: int, actor: str, ip_address: str | None = None) -> BulkAction:
    """pending/running/paused -> cancelled. What was done stays done; nothing more is touched."""
    return _operator_change(
        bulk_id=bulk_id,
        action="cancel",
        actor=actor,
        ip_address=ip_address,
        from_statuses=ACTIVE_STATUSES + (BulkActionStatus.FAILED,),
        updates={"status": BulkActionStatus.CANCELLED, "finished_at": timezone.now()},
    )


def change_bulk_rate(
    *, bulk_id: int, rate_per_second: object, actor: str, ip_address: str | None = None
) -> BulkAction:
    """Set a pending, running or paused bulk's rate (validated as at start); audited with the old
    and the new rate. A running runner picks it up within a second (deadletters.bulk.throttle).
    Raises InvalidBulkRequest for a bad rate, BulkStateConflict once the bulk has finished."""
    if rate_per_second in (None, ""):
        raise InvalidBulkRequest("rate_per_second", _("must be a number"))  # no silent default here
    rate = validate_rate(rate_per_second)
    with transaction.atomic():
        bulk = BulkAction.objects.select_for_update().filter(pk=bulk_id).first()
        if bulk is None:
            raise BulkAction.DoesNotExist(bulk_id)
        if bulk.status not in ACTIVE_STATUSES:
            raise BulkStateConflict(bulk, "rate")
        before = bulk.rate_per_second
        BulkAction.objects.filter(pk=bulk_id, status__in=ACTIVE_STATUSES).update(
            rate_per_second=rate, updated_at=timezone.now()
        )
        record_audit(
            action="bulk_rate",
            actor=actor,
            ip_address=ip_address,
            item_count=max(bulk.total - bulk.processed, 0),
            details={
                "bulk": str(bulk.public_id),
                "bulk_action": bulk.action,
                "rate_before": before,
                "rate_per_second": rate,
            },
        )
        bulk.refresh_from_db()
    logger.info("bulk %s rate %s -> %s by %s", bulk.public_id, before, rate, actor)
    return bulk
