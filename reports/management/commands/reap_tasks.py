from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _
from redis.exceptions import RedisError

from reports.housekeeper.reaper import reap_tasks


class Command(BaseCommand):
    help = (
        "One reaper pass, for cron (`manage.py housekeeper` runs it all the time): due retries "
        "promoted, attempts whose lease lapsed (their worker died) counted as abandoned with the "
        "normal retry/dead policy, pending or retrying tasks whose RQ job is gone from Redis enqueued "
        "again. Safe to run on several machines."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--batch-size", type=int, default=500, help="tasks examined per pass and scan (default 500)"
        )

    def handle(self, *args, batch_size, verbosity, **options):
        if batch_size <= 0:
            raise CommandError(_("--batch-size must be positive"))
        try:
            report = reap_tasks(batch_size=batch_size)
        except RedisError as exc:
            raise CommandError(
                _("Redis unreachable (%(error)s); is `manage.py up` running, or REDIS_URL set?") % {"error": exc}
            ) from exc
        if verbosity >= 1:
            self.stdout.write(
                _("reaped: %(abandoned)d abandoned attempt(s) recovered, %(reenqueued)d lost job(s) re-enqueued")
                % {"abandoned": report.abandoned, "reenqueued": report.reenqueued}
            )
            if report.skipped_locked:
                self.stdout.write(_("another reaper was scanning for lost jobs; this pass left them to it"))
