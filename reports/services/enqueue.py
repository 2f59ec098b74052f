"""A task's attempts onto their queues: one RQ job per attempt, with the id
`report-<task>-<attempt>` and the payload (task id, attempt number) and nothing else. The job's
meta may name the task's kind: a hint that lets a pool worker take the kind's concurrency slot in
the round trip that dequeues the job (reports/worker/pool_rq.py); the claim checks it against
the row, and a job without it is claimed all the same."""

from collections.abc import Iterable
from datetime import datetime

from config.observability import trace_meta
from transport.queues import enqueue_job, enqueue_jobs_many, on_commit_robust

REPORT_JOB_FUNC = "reports.worker.report_job.run_report_task"
BATCH_FAN_OUT_FUNC = "reports.worker.report_job.fan_out_batch"


def job_id_for(task_id: int, attempt: int) -> str:
    return f"report-{task_id}-{attempt}"


def _description(task_id: int, attempt: int) -> str:
    return f"report task {task_id} attempt {attempt}"


def kind_hint(kind: str) -> dict | None:
    """The job's meta: its kind (the dequeue's cap check) and the trace it continues, if any."""
    meta = ({"kind": kind} if kind else {}) | trace_meta()
    return meta or None


def enqueue_attempt(
    *, task_id: int, attempt: int, priority: str, timeout: int, at: datetime | None = None, kind: str = ""
) -> str:
    """Put one attempt on its priority's queue, now or at `at` (through RQ's scheduler)."""
    return enqueue_job(
        REPORT_JOB_FUNC,
        queue=priority,
        job_id=job_id_for(task_id, attempt),
        args=(task_id, attempt),
        timeout=timeout,
        description=_description(task_id, attempt),
        at=at,
        meta=kind_hint(kind),
    )


def enqueue_next_attempt_on_commit(task, *, at: datetime | None = None) -> None:
    """Enqueue the task's next attempt once the current transaction commits (now, or at `at`)."""
    on_commit_robust(
        enqueue_attempt,
        task_id=task.pk,
        attempt=task.attempt + 1,
        priority=task.priority,
        timeout=task.timeout_seconds,
        at=at,
        kind=task.kind,
    )


def enqueue_attempts_many(items: Iterable[tuple]) -> int:
    """Enqueue (task_id, attempt, priority, timeout[, kind]) tuples with one pipeline per queue."""
    return enqueue_jobs_many(
        REPORT_JOB_FUNC,
        (
            (
                priority, job_id_for(task_id, attempt), (task_id, attempt), timeout,
                _description(task_id, attempt), kind_hint(kind[0] if kind else ""),
            )
            for task_id, attempt, priority, timeout, *kind in items
        ),
    )


def enqueue_attempts_on_commit(items: list[tuple]) -> None:
    """enqueue_attempts_many once the current transaction commits (robust: the reaper enqueues a
    task whose job never arrived)."""
    if items:
        on_commit_robust(enqueue_attempts_many, items)


def enqueue_batch_fan_out(*, batch_id: int) -> str:
    """One job that enqueues a large batch's tasks (reports.worker.report_job.fan_out_batch)."""
    return enqueue_job(
        BATCH_FAN_OUT_FUNC,
        queue="high",
        job_id=f"batch-fan-out-{batch_id}",
        args=(batch_id,),
        description=f"enqueue the tasks of batch {batch_id}",
    )
