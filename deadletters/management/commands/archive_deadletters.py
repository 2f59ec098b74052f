"""manage.py archive_deadletters: archive expired dead letters (and optionally purge old archived
ones to a gzip JSON-lines file). Safe to run from cron: see deadletters/services/archive.py and
deadletters/services/purge.py."""

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from deadletters.services.archive import (
    ArchiveLocked,
    RunResult,
    archive_expired_dead_letters,
    archive_lock,
)
from deadletters.services.purge import purge_archived_dead_letters

DRY_RUN_GROUPS_SHOWN = 100
SAMPLE_SHOWN = 120  # characters of "error type: first line of a sample message" per group


def _non_negative(value: str) -> float:
    number = float(value)
    if number < 0 or number != number:
        raise ValueError(value)
    return number


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(value)
    return number


class Command(BaseCommand):
    help = (
        "Archive open dead letters whose expire_at has passed (created + DEADLETTER_RETENTION_DAYS). "
        "Exits 0 when another run holds the lock; non-zero only on a real error."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--older-than",
            type=_non_negative,
            metavar="DAYS",
            help="archive open letters created more than DAYS ago, instead of using expire_at",
        )
        parser.add_argument(
            "--dry-run", action="store_true",
            help="change nothing; print counts by kind and fingerprint, each with its error and a sample "
            "message",
        )
        parser.add_argument(
            "--batch-size", type=_positive_int, default=1000, help="rows per transaction (1000)"
        )
        parser.add_argument(
            "--purge-archived-after",
            type=_non_negative,
            metavar="DAYS",
            help="also delete letters archived more than DAYS ago, after writing them to a "
            "run of gzip JSON-lines parts in the archive storage (ARCHIVE_DIR or the S3 bucket)",
        )
        parser.add_argument(
            "--batch-pause",
            type=_non_negative,
            default=0.0,
            metavar="SECONDS",
            help="sleep between batches to spare a busy database (0)",
        )

    def handle(self, *args, **options):
        self.verbosity = options["verbosity"]
        dry_run = options["dry_run"]
        common = dict(
            batch_size=options["batch_size"],
            dry_run=dry_run,
            progress=self._progress,
            pause_seconds=options["batch_pause"],
        )
        try:
            with archive_lock():
                archived = archive_expired_dead_letters(older_than_days=options["older_than"], **common)
                self._report("archive", archived)
                if options["purge_archived_after"] is not None:
                    purged = purge_archived_dead_letters(
                        older_than_days=options["purge_archived_after"], **common
                    )
                    self._report("purge", purged)
        except ArchiveLocked as exc:
            self._say(_("skipped: %(why)s; nothing to do for this run") % {"why": exc})
        except ValueError as exc:
            raise CommandError(str(exc)) from None

    def _say(self, line: str, level: int = 1) -> None:
        if self.verbosity >= level:
            self.stdout.write(line)
            self.stdout.flush()

    def _progress(self, phase: str, batch: int, rows: int, total: int) -> None:
        line = (
            _("archive batch %(batch)d: archived %(rows)d (total %(total)d)")
            if phase == "archive"
            else _("purge batch %(batch)d: purged %(rows)d (total %(total)d)")
        )
        self._say(line % {"batch": batch, "rows": rows, "total": total}, level=2)

    def _report(self, phase: str, result: RunResult) -> None:
        where = f"{result.basis} <= {result.cutoff:%Y-%m-%d %H:%M:%S%z}"
        if result.dry_run:
            line = (
                _("dry run: would archive %(n)d dead letters (%(where)s)")
                if phase == "archive"
                else _("dry run: would purge %(n)d dead letters (%(where)s)")
            )
            self._say(line % {"n": result.count, "where": where})
            shown = result.groups if self.verbosity >= 2 else result.groups[:DRY_RUN_GROUPS_SHOWN]
            for group in shown:
                sample = f"{group['error_type']}: {group['sample_message']}"
                if len(sample) > SAMPLE_SHOWN:
                    sample = sample[: SAMPLE_SHOWN - 1] + "…"
                self._say(f"  {group['n']:>8}  {group['kind']:<20} {group['fingerprint']}  {sample}")
            if len(shown) < len(result.groups):
                more = len(result.groups) - len(shown)
                self._say("  ... " + _("%(n)d more groups (--verbosity 2 shows all)") % {"n": more})
            return
        line = (
            _("archived %(n)d dead letters in %(batches)d batches (%(where)s)")
            if phase == "archive"
            else _("purged %(n)d dead letters in %(batches)d batches (%(where)s)")
        ) % {"n": result.count, "batches": result.batches, "where": where}
        if result.file is not None:
            line += _("; written to %(file)s/ in the archive storage") % {"file": result.file}
        self._say(line)
