import logging
import signal
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections
from redis.exceptions import RedisError

from deadletters.services.bulk import resume_stalled_bulk_actions
from reports import semaphore
from reports.batches import aggregate_batches
from reports.services import reap_tasks

logger = logging.getLogger("reports.reaper")


class Command(BaseCommand):
    help = (
        "Recover report tasks whose worker died (expired lease -> attempt counted as abandoned, "
        "then the normal retry/dead policy) and re-enqueue pending or retrying tasks whose RQ job "
        "is gone from Redis; also completes finished batches, wakes tasks waiting for a concurrency slot "
        "and resumes bulk console actions whose runner was lost. One pass by default; --loop keeps "
        "running. Safe to run on several machines."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--loop", action="store_true", help="run forever, one pass every --interval seconds"
        )
        parser.add_argument(
            "--interval",
            type=float,
            default=settings.REAPER_INTERVAL,
            help="seconds between passes (default %(default)s)",
        )
        parser.add_argument(
            "--batch-size", type=int, default=500, help="tasks examined per pass and scan (default 500)"
        )

    def handle(self, *args, loop, interval, batch_size, verbosity, **options):
        if interval <= 0 or batch_size <= 0:
            self.stderr.write("--interval and --batch-size must be positive")
            raise SystemExit(2)
        stopping = []
        if loop:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stopping.append(True))
        while True:
            try:
                report = reap_tasks(batch_size=batch_size)
            except RedisError as exc:
                if not loop:
                    raise CommandError(
                        f"Redis unreachable ({exc}); is `manage.py up` running, or REDIS_URL set?"
                    ) from exc
                logger.error("reaper pass failed, Redis unreachable: %s", exc)
            else:
                if report.skipped_locked:
                    if verbosity >= 1 and not loop:
                        self.stdout.write("another reaper holds the lock; nothing to do")
                elif verbosity >= 2 or (
                    verbosity >= 1 and (report.abandoned or report.reenqueued or not loop)
                ):
                    self.stdout.write(
                        f"reaped: {report.abandoned} abandoned attempt(s) recovered, "
                        f"{report.reenqueued} lost job(s) re-enqueued"
                    )
            try:
                # Batches: completion by counting, and capped tasks woken when a lease freed a slot.
                aggregate_batches()
                semaphore.wake_all()
                # Bulk console actions whose runner job was lost (killed worker, flushed Redis).
                resume_stalled_bulk_actions()
            except RedisError as exc:
                if not loop:
                    raise CommandError(f"Redis unreachable ({exc})") from exc
                logger.error("aggregator pass failed, Redis unreachable: %s", exc)
            if not loop:
                return
            close_old_connections()
            deadline = time.monotonic() + interval
            while not stopping and time.monotonic() < deadline:
                time.sleep(min(0.2, interval))
            if stopping:
                return
