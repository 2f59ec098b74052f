"""Live-task controls against real workers: a cancel racing a claim, a stop racing a completion,
and a stop that really ends the work-horse. Each control is a compare-and-set, so every task
ends with exactly one story: it ran or it was cancelled, it finished or it was stopped."""

import os
import random
import time

import pytest

from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
from reports.services import TaskNotControllable, cancel_task, stop_attempt, submit_task
from reports.services.controls import STOP_THEN_CANCEL
from reports.services.enqueue import job_id_for
from tests.conftest import horse_pid_of_running_attempt, wait_until
from transport.queues import job_states

pytestmark = pytest.mark.django_db(transaction=True)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_cancel_racing_the_claim_either_wins_before_any_attempt_or_loses_with_409(
    start_worker, fast_retries
):
    rng = random.Random(3)
    tasks, won, lost = [], set(), set()
    for _ in range(4):  # cancelled before any worker listens: the winning side on any machine speed
        tasks.append(submit_task(kind="probe", params={"sleep_seconds": 0}).task)
        cancel_task(task_id=tasks[-1].pk)
        won.add(tasks[-1].pk)
    start_worker()
    for number in range(40):
        task = submit_task(kind="probe", params={"sleep_seconds": 0}).task
        tasks.append(task)
        if number % 4 == 3:
            # Every fourth waits for the claim, so the losing side is exercised on any machine speed.
            wait_until(lambda pk=task.pk: status_of(pk) != TaskStatus.PENDING, message="the claim")
        else:
            time.sleep(rng.uniform(0, 0.15))  # about when the worker claims it: some before, some after
        try:
            cancel_task(task_id=task.pk)
            won.add(task.pk)
        except TaskNotControllable:
            lost.add(task.pk)

    wait_until(
        lambda: (
            not ReportTask.objects.filter(pk__in=lost, status__in=("pending", "running", "retrying")).exists()
        ),
        timeout=60,
        message="the tasks the cancel lost to finish",
    )
    assert won and lost, "the race needs both outcomes to mean anything"
    for task in ReportTask.objects.filter(pk__in=[t.pk for t in tasks]):
        attempts = list(TaskAttempt.objects.filter(task=task).values_list("outcome", flat=True))
        if task.pk in won:
            assert task.status == TaskStatus.CANCELLED and attempts == [], (task, attempts)
        else:
            assert task.status == TaskStatus.DONE and attempts == [AttemptOutcome.SUCCEEDED], (task, attempts)
    # Every cancelled task's job was delivered and settled (a phantom): none of them ran late.
    won_jobs = [job_id_for(pk, 1) for pk in won]
    wait_until(
        lambda: all(state in (None, "finished", "failed") for state in job_states(won_jobs).values()),
        message="the cancelled tasks' jobs to be delivered",
    )
    assert not TaskAttempt.objects.filter(task_id__in=won).exists()


def status_of(task_id: int) -> str:
    return ReportTask.objects.values_list("status", flat=True).get(pk=task_id)


def test_a_stop_racing_the_completion_either_stops_the_attempt_or_loses_with_409(start_worker, fast_retries):
    fast_retries.REPORT_HEARTBEAT_SECONDS = 0.2
    start_worker()
    rng = random.Random(5)
    outcomes = {}
    for _ in range(12):
        task = submit_task(kind="probe", params={"sleep_seconds": 0.3}).task
        running = wait_until(
            lambda pk=task.pk: (
                ReportTask.objects.filter(pk=pk, status=TaskStatus.RUNNING).first()
                or ReportTask.objects.filter(pk=pk, status=TaskStatus.DONE).first()
            ),
            message="the task to start",
        )
        time.sleep(rng.uniform(0.15, 0.45))  # around the end of its 0.3 s run
        try:
            stop_attempt(task_id=task.pk, attempt=max(running.attempt, 1), then=STOP_THEN_CANCEL)
            outcomes[task.pk] = "stopped"
        except TaskNotControllable:
            outcomes[task.pk] = "finished first"
        wait_until(
            lambda pk=task.pk: (
                not TaskAttempt.objects.filter(task_id=pk, outcome=AttemptOutcome.RUNNING).exists()
                and ReportTask.objects.get(pk=pk).status != TaskStatus.RUNNING
            ),
            message="the attempt to end",
        )

    assert "stopped" in outcomes.values()
    for pk, outcome in outcomes.items():
        task = ReportTask.objects.get(pk=pk)
        attempts = list(TaskAttempt.objects.filter(task_id=pk).values_list("outcome", flat=True))
        if outcome == "stopped":
            assert task.status == TaskStatus.CANCELLED and attempts == [AttemptOutcome.STOPPED], (
                task,
                attempts,
            )
            assert task.output_file == ""
        else:
            assert task.status == TaskStatus.DONE and attempts == [AttemptOutcome.SUCCEEDED], (task, attempts)


def test_a_stopped_attempt_loses_its_work_horse_at_the_next_heartbeat_and_the_worker_goes_on(
    start_worker, fast_retries
):
    fast_retries.REPORT_HEARTBEAT_SECONDS = 0.5
    fast_retries.REPORT_JOB_TIMEOUT = 300
    worker = start_worker()
    task = submit_task(kind="probe", params={"sleep_seconds": 60}).task
    running = wait_until(
        lambda: ReportTask.objects.filter(pk=task.pk, status=TaskStatus.RUNNING).first(),
        message="the task to start",
    )
    horse = horse_pid_of_running_attempt(running)

    stop_attempt(task_id=task.pk, attempt=running.attempt, then="retry", note="wrong month")

    wait_until(lambda: not pid_alive(horse), timeout=10, message="the horse to be killed")
    wait_until(
        lambda: ReportTask.objects.get(pk=task.pk).attempt == 2, timeout=20, message="the retry to start"
    )
    first = TaskAttempt.objects.get(task=task, number=1)
    assert first.outcome == AttemptOutcome.STOPPED and "wrong month" in first.error_message
    stop_attempt(task_id=task.pk, attempt=2, then=STOP_THEN_CANCEL)
    other = submit_task(kind="probe", params={"sleep_seconds": 0}).task
    wait_until(
        lambda: ReportTask.objects.get(pk=other.pk).status == TaskStatus.DONE,
        timeout=30,
        message="the worker to run the next task",
    )
    assert ReportTask.objects.get(pk=task.pk).status == TaskStatus.CANCELLED
    assert worker.process.poll() is None
