"""A forking RQ worker that prepares its parent before forking, to measure what that is worth.

RQ imports a job's function inside the work-horse, after the fork, and every horse starts with
cold Django state (lazily built model metadata, no database connection). PreloadedWorker imports
the job modules once in the parent and runs the claim/complete queries against a task id that
cannot exist (no row changes), then closes the connections so no horse inherits a socket.
Bench 1 runs it with `--worker-class fork-preload`, for both sides, so the comparison stays fair.
"""

import importlib

from rq import Worker

PRELOAD = ("reports.jobs", "reports.kinds", "deadletters.services", "bench.noop")


def warm_up() -> None:
    from django.db import connections, transaction

    from reports.models import AttemptOutcome, PausedKind, ReportTask, TaskAttempt, TaskStatus

    with transaction.atomic():
        ReportTask.objects.filter(pk=-1).only("timeout_seconds", "kind", "priority").first()
        PausedKind.objects.filter(kind="").exists()
        ReportTask.objects.filter(pk=-1, status=TaskStatus.RUNNING, attempt=0).update(status=TaskStatus.RUNNING)
        TaskAttempt.objects.filter(task_id=-1, number=0).only("started_at").first()
        TaskAttempt.objects.filter(task_id=-1, number=0, outcome=AttemptOutcome.RUNNING).update(
            outcome=AttemptOutcome.RUNNING
        )
        ReportTask.objects.filter(pk=-1).first()
        transaction.set_rollback(True)
    connections.close_all()


class PreloadedWorker(Worker):
    def __init__(self, *args, **kwargs):
        for module in PRELOAD:
            importlib.import_module(module)
        warm_up()
        super().__init__(*args, **kwargs)
