"""Report-task workflow, one module per concern: submission, the engine (every transition of a
task: reports/services/engine.py), batches, pauses, the concurrency cap, API tokens. Every state
change is one conditional UPDATE on the task row; RQ hears of a change only after its transaction
commits.

The names most callers need are handed on here."""

from reports.services.controls import Controlled, TaskNotControllable, TaskNotFound, TaskNotReplayable
from reports.services.engine import (
    CAP_REASON,
    PAUSED_REASON,
    ClaimDeferred,
    FailureInfo,
    Requeued,
    RequeuedTask,
    cancel_task,
    claim_task,
    complete_task,
    promote_due_retries,
    record_attempt_failure,
    renew_lease,
    requeue_dead_task,
    requeue_dead_tasks,
    retry_task_now,
    stop_attempt,
    take_back_lapsed,
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
    "Controlled",
    "FailureInfo",
    "IdempotencyConflict",
    "Requeued",
    "RequeuedTask",
    "SubmitResult",
    "TaskNotControllable",
    "TaskNotFound",
    "TaskNotReplayable",
    "cancel_task",
    "claim_task",
    "complete_task",
    "contains_nul",
    "promote_due_retries",
    "record_attempt_failure",
    "renew_lease",
    "requeue_dead_task",
    "requeue_dead_tasks",
    "retry_task_now",
    "stop_attempt",
    "submit_task",
    "take_back_lapsed",
    "validate_idempotency_key",
    "validate_submission",
]
