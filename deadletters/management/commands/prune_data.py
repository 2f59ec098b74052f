"""manage.py prune_data: delete what RETENTION_DAYS says is old enough (deadletters/services/retention.py).
Safe from cron and beside the housekeeper, which runs the same duty: batches never overlap in effect."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from deadletters.services.retention import BATCH_SIZE, data_prune


class Command(BaseCommand):
    help = (
        "Delete done and cancelled tasks (with their attempts and report files), the tasks of purged "
        "dead letters and audit entries older than RETENTION_DAYS. --dry-run counts without deleting."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true",
                            help="count what would be deleted, delete nothing")
        parser.add_argument("--batch-size", type=int, default=BATCH_SIZE,
                            help=f"rows a transaction (default {BATCH_SIZE})")

    def handle(self, *args, dry_run=False, batch_size=BATCH_SIZE, **options):
        if batch_size < 1:
            raise CommandError(_("--batch-size must be at least 1"))
        verbose = options["verbosity"] >= 1
        if verbose:
            kept = ", ".join(f"{what} {days or '∞'}" for what, days in settings.RETENTION_DAYS.items())
            self.stderr.write(_("Retention in days: %(kept)s") % {"kept": kept})

        def progress(what: str, count: int) -> None:
            if verbose and not dry_run:
                self.stderr.write(_("  %(what)s: %(count)d deleted so far") % {"what": what, "count": count})

        result = data_prune(dry_run=dry_run, batch_size=batch_size, progress=progress)
        verb = _("would delete") if dry_run else _("deleted")
        for what, count in result.deleted.items():
            self.stdout.write(f"{what}: {verb} {count}")
