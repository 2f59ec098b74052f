"""Report-task workflow, one module per concern: submission, an attempt's life (claim,
complete, fail) and the compare-and-set a replay is built on. Every state change is one
conditional UPDATE on the task row; RQ hears of a change only after its transaction commits.

The names most callers need are handed on here."""

from reports.services.attempts import (
    CAP_REASON,
    PAUSED_REASON,
    ClaimDeferred,
    FailureInfo,
    claim_task,
    complete_task,
    record_attempt_failure,
    renew_lease,
)
from reports.services.requeue import (
    Requeued,
    RequeuedTask,
    TaskNotFound,
    TaskNotReplayable,
    requeue_dead_task,
    requeue_dead_tasks,
)
from reports.services.submission import (
    IdempotencyConflict,
    SubmitResult,
    contains_nul,
    submit_task,
    validate_idempotency_key,
    validate_submission,
)

__all__ = [
    "CAP_REASON",
    "PAUSED_REASON",
    "ClaimDeferred",
    "FailureInfo",
    "IdempotencyConflict",
    "Requeued",
    "RequeuedTask",
    "SubmitResult",
    "TaskNotFound",
    "TaskNotReplayable",
    "claim_task",
    "complete_task",
    "record_attempt_failure",
    "renew_lease",
    "requeue_dead_task",
    "requeue_dead_tasks",
    "submit_task",
    "validate_idempotency_key",
    "validate_submission",
    "contains_nul",
]
