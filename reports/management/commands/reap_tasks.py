import logging

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _
from redis.exceptions import RedisError

from config.looping import run_passes
from reports.services import concurrency
from reports.services.batches import aggregate_batches
from reports.signals import reaper_pass_finished
from reports.worker.reaper import reap_tasks

logger = logging.getLogger("reports.worker.reaper")


class Command(BaseCommand):
    help = (
        "Recover report tasks whose worker died (expired lease -> attempt counted as abandoned, "
        "then the normal retry/dead policy) and re-enqueue pending or retrying tasks whose RQ job "
        "is gone from Redis; also completes finished batches, wakes tasks waiting for a concurrency slot "
        "and resumes bulk console actions whose runner was lost. One pass by default; --loop keeps "
        "running. Safe to run on several machines."
    )

    def add_arguments(self, parser):
        parser.add_argument("--loop", action="store_true", help="run forever, one pass every --interval seconds")
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
            self.stderr.write(_("--interval and --batch-size must be positive"))
            raise SystemExit(2)
        run_passes(lambda: self._one_pass(loop, batch_size, verbosity), loop=loop, interval=interval)

    def _one_pass(self, loop: bool, batch_size: int, verbosity: int) -> None:
        try:
            report = reap_tasks(batch_size=batch_size)
        except RedisError as exc:
            if not loop:
                raise CommandError(
                    _("Redis unreachable (%(error)s); is `manage.py up` running, or REDIS_URL set?") % {"error": exc}
                ) from exc
            logger.error("reaper pass failed, Redis unreachable: %s", exc)
        else:
            if report.skipped_locked:
                if verbosity >= 1 and not loop:
                    self.stdout.write(_("another reaper holds the lock; nothing to do"))
            elif verbosity >= 2 or (verbosity >= 1 and (report.abandoned or report.reenqueued or not loop)):
                self.stdout.write(
                    _("reaped: %(abandoned)d abandoned attempt(s) recovered, %(reenqueued)d lost job(s) re-enqueued")
                    % {"abandoned": report.abandoned, "reenqueued": report.reenqueued}
                )
        try:
            # Batches: completion by counting, and capped tasks woken when a lease freed a slot.
            aggregate_batches()
            concurrency.wake_all()
            # The layers above hang their housekeeping here (bulk actions whose runner was lost).
            reaper_pass_finished.send(sender=self.__class__)
        except RedisError as exc:
            if not loop:
                raise CommandError(_("Redis unreachable (%(error)s)") % {"error": exc}) from exc
            logger.error("aggregator pass failed, Redis unreachable: %s", exc)
