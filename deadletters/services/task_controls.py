"""Live-task controls with their audit entry: cancel, retry now, stop a running attempt. The
transition (reports/services/engine.py) and the entry saying who did it and why commit
together or not at all; a refused control (TaskNotControllable) writes nothing."""

from django.db import transaction

from deadletters.audit import record_audit
from reports.services import Controlled, cancel_task, retry_task_now, stop_attempt
from reports.services.controls import STOP_THEN_CANCEL


def _audited(action: str, control, *, actor, source, reason, ip_address, details=None) -> Controlled:
    with transaction.atomic():
        done = control()
        record_audit(
            action=action,
            actor=actor,
            source=source,
            ip_address=ip_address,
            task=done.task,
            reason=reason,
            details={**(details or {}), "status": done.task.status},
        )
    return done


def task_cancel(
    *, task_id: int, actor: str, source: str = "console", reason: str = "", ip_address=None
) -> Controlled:
    return _audited(
        "cancel",
        lambda: cancel_task(task_id=task_id),
        actor=actor,
        source=source,
        reason=reason,
        ip_address=ip_address,
    )


def task_retry_now(
    *, task_id: int, actor: str, source: str = "console", reason: str = "", ip_address=None
) -> Controlled:
    return _audited(
        "retry_now",
        lambda: retry_task_now(task_id=task_id),
        actor=actor,
        source=source,
        reason=reason,
        ip_address=ip_address,
    )


def task_stop(
    *,
    task_id: int,
    attempt: int,
    then: str = STOP_THEN_CANCEL,
    actor: str,
    source: str = "console",
    reason: str = "",
    ip_address=None,
) -> Controlled:
    return _audited(
        "stop",
        lambda: stop_attempt(task_id=task_id, attempt=attempt, then=then, note=reason),
        actor=actor,
        source=source,
        reason=reason,
        ip_address=ip_address,
        details={"attempt": attempt, "then": then},
    )
