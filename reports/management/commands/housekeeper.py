from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from reports.housekeeper.loop import Housekeeper


def said(result: object) -> str:
    """What a duty's return value says in one line: a count, or its own summary."""
    if result is None:
        return _("left to another housekeeper (it holds the lock)")
    return str(len(result)) if isinstance(result, list | tuple) else str(result)


class Command(BaseCommand):
    help = (
        "Run every periodic duty of the house, each at its interval, until SIGTERM or Ctrl-C: take "
        "back lapsed leases, enqueue lost jobs again, promote due retries, wake capped tasks, complete "
        "batches, start scheduled and canary runs, resume stalled bulk actions, announce resolved and "
        "snoozed causes, send alerts as a backstop. An outage of the database or Redis puts the duties "
        "on hold until both answer again; the process never exits for it. Safe to run on several "
        "machines at once. --once runs each duty once (cron). With PROBE_FILE set, "
        "`report-probe live|ready` answers for it."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--once", action="store_true", help="run each duty once, say what it did, and exit (cron)"
        )

    def handle(self, *args, once, verbosity, **options):
        housekeeper = Housekeeper()
        if once:
            done = housekeeper.run_once()
            for duty, result in done:
                if verbosity >= 1:
                    self.stdout.write(f"{duty.name}: {said(result)}")
            failed = [duty.name for duty, result in done if isinstance(result, Exception)]
            if failed:
                raise CommandError(_("failed: %(duties)s") % {"duties": ", ".join(failed)})
            return
        housekeeper.run()
