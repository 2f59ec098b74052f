"""Model factories for tests: rows made through the services where a workflow is involved."""

from django.utils import timezone

from deadletters.fingerprints import fingerprint
from deadletters.models import DeadLetter
from reports.models import ReportTask, TaskAttempt, TaskStatus


def make_task(**fields) -> ReportTask:
    defaults = dict(kind="probe", params={}, max_attempts=3, timeout_seconds=300, status=TaskStatus.PENDING)
    defaults.update(fields)
    return ReportTask.objects.create(**defaults)


def make_dead_letter(
    *, task=None, error_type="reports.errors.TransientError", error_message="boom", **fields
):
    """A dead task with its attempts and dead letter, as record_attempt_failure leaves them."""
    now = timezone.now()
    if task is None:
        task = make_task(
            status=TaskStatus.DEAD, attempt=3, finished_at=now, last_error=f"{error_type}: {error_message}"
        )
    for number in range(1, task.attempt + 1):
        TaskAttempt.objects.get_or_create(
            task=task,
            number=number,
            defaults=dict(
                started_at=now,
                finished_at=now,
                outcome="failed",
                error_type=error_type,
                error_message=error_message,
                worker="factory pid 1",
                duration_seconds=0.1,
            ),
        )
    defaults = dict(
        task=task,
        kind=task.kind,
        params=task.params,
        error_type=error_type,
        error_message=error_message,
        traceback=f"Traceback (most recent call last):\n{error_type}: {error_message}\n",
        attempts=task.attempt,
        fingerprint=fingerprint(error_type, error_message),
    )
    defaults.update(fields)
    return DeadLetter.objects.create(**defaults)
