import time

from django.core.management.base import BaseCommand, CommandError

from deadletters.audit import ReasonRequired
from deadletters.bulk.control import start_bulk_action
from deadletters.bulk.selection import SCOPE_FILTER, InvalidBulkRequest, build_selection, preview_bulk_action
from deadletters.management.filter_options import add_filter_options, filters_from_options
from deadletters.models import BulkAction, BulkActionStatus
from deadletters.services.letters import DeadLetterNotFound
from deadletters.services.replay import replay_dead_letter
from reports.services import TaskNotReplayable

ENDED = (
    BulkActionStatus.COMPLETED,
    BulkActionStatus.CANCELLED,
    BulkActionStatus.FAILED,
    BulkActionStatus.PAUSED,
)


class Command(BaseCommand):
    help = (
        "Replay dead letters: the ones named by --id, or every letter a filter matches (the console's "
        "list filter) as a bulk replay the workers run at --rate per second, which this command "
        "follows until it ends (--no-wait: start it and return). --dry-run only counts. Exits 1 when "
        "something was not replayed."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--id", type=int, action="append", dest="ids", default=[], help="a dead letter id (repeatable)"
        )
        parser.add_argument("--reason", default="", help="why (kept in the audit log)")
        parser.add_argument("--actor", default="manage.py", help="who replays (default %(default)s)")
        parser.add_argument(
            "--rate", type=float, default=None, help="letters per second of a filtered replay"
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would be replayed; change nothing"
        )
        parser.add_argument("--no-wait", action="store_true", help="start a filtered replay and return")
        add_filter_options(parser)

    def handle(self, *args, ids, reason, actor, rate, dry_run, no_wait, verbosity, **options):
        if ids:
            return self._replay_ids(ids, reason=reason, actor=actor, dry_run=dry_run)
        filters = filters_from_options(options)
        if not filters.is_narrowed:
            raise CommandError(
                "name dead letters with --id or narrow the filter (--kind, --fingerprint, ...)"
            )
        try:
            selection = build_selection(action="replay", scope=SCOPE_FILTER, filter_qs=filters.querystring())
        except InvalidBulkRequest as exc:
            raise CommandError(str(exc)) from None
        if dry_run:
            self.stdout.write(
                f"{preview_bulk_action(selection=selection).count} dead letters would be replayed"
            )
            return
        try:
            bulk, _ = start_bulk_action(
                selection=selection, actor=actor, ip_address=None, reason=reason, rate_per_second=rate
            )
        except (InvalidBulkRequest, ReasonRequired) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"bulk replay {bulk.public_id} started: {bulk.total} dead letters at {bulk.rate_per_second}/s"
        )
        if not no_wait:
            self._follow(bulk.pk, verbosity)

    def _replay_ids(self, ids, *, reason, actor, dry_run) -> None:
        failed = 0
        for letter_id in ids:
            if dry_run:
                self.stdout.write(f"would replay dead letter {letter_id}")
                continue
            try:
                replay_dead_letter(
                    dead_letter_id=letter_id, actor=actor, ip_address=None, reason=reason, source="cli"
                )
                self.stdout.write(f"dead letter {letter_id} replayed")
            except (DeadLetterNotFound, TaskNotReplayable, ReasonRequired) as exc:
                failed += 1
                self.stderr.write(f"dead letter {letter_id} not replayed: {exc}")
        if failed:
            raise CommandError(f"{failed} of {len(ids)} dead letters not replayed")

    def _follow(self, bulk_id: int, verbosity: int) -> None:
        """Print progress until the bulk ends; no worker means no progress, which it says."""
        last = None
        while True:
            bulk = BulkAction.objects.get(pk=bulk_id)
            state = (bulk.status, bulk.processed)
            if verbosity >= 1 and state != last:
                self.stdout.write(
                    f"{bulk.status}: {bulk.processed} of {bulk.total} ({bulk.percent}%), {bulk.succeeded} replayed"
                )
                last = state
            if bulk.status in ENDED:
                break
            time.sleep(2)
        if bulk.status != BulkActionStatus.COMPLETED:
            raise CommandError(
                f"the bulk replay ended {bulk.status}: {bulk.paused_reason or bulk.error or 'see the console'}"
            )
