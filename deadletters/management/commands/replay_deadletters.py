import time

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from deadletters.audit import ReasonRequired
from deadletters.bulk.control import start_bulk_action
from deadletters.bulk.pause_reasons import pause_reason_words
from deadletters.bulk.selection import SCOPE_FILTER, InvalidBulkRequest, build_selection, preview_bulk_action
from deadletters.management.filter_options import add_filter_options, filters_from_options
from deadletters.models import BulkAction, BulkActionStatus
from deadletters.services.letters import DeadLetterNotFound
from deadletters.services.replay import replay_dead_letter
from reports.services import TaskNotReplayable
from reports.wording import status_word

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
            raise CommandError(_("name dead letters with --id or narrow the filter (--kind, --fingerprint, ...)"))
        try:
            selection = build_selection(action="replay", scope=SCOPE_FILTER, filter_qs=filters.querystring())
        except InvalidBulkRequest as exc:
            raise CommandError(str(exc)) from None
        if dry_run:
            count = preview_bulk_action(selection=selection).count
            self.stdout.write(
                ngettext("%(n)d dead letter would be replayed", "%(n)d dead letters would be replayed", count)
                % {"n": count}
            )
            return
        try:
            bulk, _created = start_bulk_action(
                selection=selection, actor=actor, ip_address=None, reason=reason, rate_per_second=rate
            )
        except (InvalidBulkRequest, ReasonRequired) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            ngettext(
                "bulk replay %(id)s started: %(n)d dead letter at %(rate)s/s",
                "bulk replay %(id)s started: %(n)d dead letters at %(rate)s/s",
                bulk.total,
            )
            % {"id": bulk.public_id, "n": bulk.total, "rate": bulk.rate_per_second}
        )
        if not no_wait:
            self._follow(bulk.pk, verbosity)

    def _replay_ids(self, ids, *, reason, actor, dry_run) -> None:
        failed = 0
        for letter_id in ids:
            if dry_run:
                self.stdout.write(_("would replay dead letter %(id)s") % {"id": letter_id})
                continue
            try:
                replay_dead_letter(
                    dead_letter_id=letter_id, actor=actor, ip_address=None, reason=reason, source="cli"
                )
                self.stdout.write(_("dead letter %(id)s replayed") % {"id": letter_id})
            except DeadLetterNotFound:
                failed += 1
                self.stderr.write(_("dead letter %(id)s not replayed: there is no such dead letter") % {"id": letter_id})
            except (TaskNotReplayable, ReasonRequired) as exc:
                failed += 1
                self.stderr.write(_("dead letter %(id)s not replayed: %(why)s") % {"id": letter_id, "why": exc})
        if failed:
            raise CommandError(_("%(failed)d of %(n)d dead letters not replayed") % {"failed": failed, "n": len(ids)})

    def _follow(self, bulk_id: int, verbosity: int) -> None:
        """Print progress until the bulk ends; no worker means no progress, which it says."""
        last = None
        while True:
            bulk = BulkAction.objects.get(pk=bulk_id)
            state = (bulk.status, bulk.processed)
            if verbosity >= 1 and state != last:
                self.stdout.write(
                    _("%(status)s: %(processed)d of %(total)d (%(percent)d%%), %(succeeded)d replayed")
                    % {
                        "status": status_word(bulk.status),
                        "processed": bulk.processed,
                        "total": bulk.total,
                        "percent": bulk.percent,
                        "succeeded": bulk.succeeded,
                    }
                )
                last = state
            if bulk.status in ENDED:
                break
            time.sleep(2)
        if bulk.status != BulkActionStatus.COMPLETED:
            why = pause_reason_words(bulk.paused_reason) or bulk.error or _("see the console")
            raise CommandError(
                _("the bulk replay ended %(status)s: %(why)s") % {"status": status_word(bulk.status), "why": why}
            )
