"""Paused kinds: claims are deferred (no attempt used, no dead letter, no busy worker) until the
kind is resumed, which enqueues the waiting tasks at once."""

import pytest
from django.core.management import call_command
from rq.job import Job

from deadletters.models import AuditEntry, DeadLetter
from deadletters.services.kind_pauses import pause_kind, resume_kind
from reports.models import PausedKind, ReportTask, TaskAttempt, TaskStatus
from reports.services import ClaimDeferred, claim_task, submit_task
from reports.services.pausing import KindNotPaused
from tests.conftest import wait_until
from tests.reaping import reap_tasks
from transport.serializer import JobSerializer

pytestmark = pytest.mark.django_db(transaction=True)


def test_pause_twice_is_one_pause_and_resume_twice_is_refused(redis_conn):
    row, created = pause_kind(kind="probe", actor="op", reason="warehouse API down")
    again, created_again = pause_kind(kind="probe", actor="other", reason="")
    assert (created, created_again) == (True, False) and again.pk == row.pk and again.paused_by == "op"

    task = submit_task(kind="probe", params={}).task
    assert claim_task(task_id=task.pk, attempt=1, worker="w") == ClaimDeferred("kind paused")
    assert claim_task(task_id=task.pk, attempt=7, worker="w") is None  # a phantom stays a phantom
    task.refresh_from_db()
    assert (task.status, task.attempt) == (TaskStatus.PENDING, 0)

    resume_kind(kind="probe", actor="op")
    with pytest.raises(KindNotPaused):
        resume_kind(kind="probe", actor="op")
    actions = list(AuditEntry.objects.order_by("id").values_list("action", "actor"))
    assert actions == [("pause_kind", "op"), ("resume_kind", "op")]


def test_pause_consumes_no_attempt_and_resume_finishes_everything(start_worker, redis_conn, settings):
    call_command("pause_kind", "probe", reason="downstream down", verbosity=0)
    tasks = [submit_task(kind="probe", params={"fail_attempts": 0}).task for _ in range(4)]
    worker = start_worker()

    # Every job is delivered once and ends as "deferred": the worker is free again.
    def all_deferred():
        jobs = [Job.fetch(f"report-{t.pk}-1", connection=redis_conn, serializer=JobSerializer) for t in tasks]
        return all(job.get_status() == "finished" and job.return_value() == "deferred" for job in jobs)

    wait_until(all_deferred, timeout=60, message="the paused kind's jobs to be deferred")
    # Decided by the worker process itself, before any fork.
    assert (f"reports.worker {worker.pid} task {tasks[0].pk} attempt 1 deferred: kind paused"
            in worker.output())
    assert set(ReportTask.objects.values_list("status", "attempt")) == {(TaskStatus.PENDING, 0)}
    assert not TaskAttempt.objects.exists() and not DeadLetter.objects.exists()
    # The reaper leaves paused tasks alone instead of delivering them again and again.
    settings.REPORT_REENQUEUE_AFTER = 0
    assert reap_tasks(use_lock=False).reenqueued == 0

    call_command("resume_kind", "probe", verbosity=0)
    wait_until(
        lambda: ReportTask.objects.filter(status=TaskStatus.DONE).count() == 4,
        timeout=60,
        message="the resumed tasks to finish",
    )
    assert set(ReportTask.objects.values_list("attempt", flat=True)) == {1}
    assert not PausedKind.objects.exists()
