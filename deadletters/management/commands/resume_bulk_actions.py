from django.core.management.base import BaseCommand
from django.utils.translation import ngettext

from deadletters.bulk.runner import resume_stalled_bulk_actions


class Command(BaseCommand):
    help = (
        "Re-enqueue bulk actions whose runner went quiet (worker killed, job lost). "
        "Cron-safe: the keyset cursor makes a resumed run carry on, never repeat."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--stale-after",
            type=int,
            default=None,
            help="seconds without progress (BULK_ACTION_STALE_SECONDS)",
        )

    def handle(self, *args, stale_after=None, **options):
        ids = resume_stalled_bulk_actions(stale_after_seconds=stale_after)
        self.stdout.write(
            ngettext("re-enqueued %(n)d bulk action", "re-enqueued %(n)d bulk actions", len(ids)) % {"n": len(ids)}
        )
