from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from reports.housekeeper.loop import Housekeeper, serve_probes


class Command(BaseCommand):
    help = (
        "Run every periodic duty of the house, each at its interval, until SIGTERM or Ctrl-C: take "
        "back lapsed leases, enqueue lost jobs again, promote due retries, wake capped tasks, complete "
        "batches, start scheduled and canary runs, resume stalled bulk actions, announce resolved and "
        "snoozed causes, send alerts as a backstop. An outage of the database or Redis puts the duties "
        "on hold until both answer again; the process never exits for it. Safe to run on several "
        "machines at once."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--probes",
            metavar="HOST:PORT",
            help="serve /healthz (the loop turns) and /readyz (the database and Redis answer) there",
        )

    def handle(self, *args, probes, **options):
        housekeeper = Housekeeper()
        if probes:
            host, _sep, port = probes.rpartition(":")
            if not port.isdigit():
                raise CommandError(_("--probes takes HOST:PORT, not %(value)r") % {"value": probes})
            serve_probes(housekeeper, host.strip("[]") or "127.0.0.1", int(port))
        housekeeper.run()
