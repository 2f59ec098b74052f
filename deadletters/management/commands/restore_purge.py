"""manage.py restore_purge RUN: load a purge run's exported parts back as archived dead letters
(deadletters/services/restore.py)."""

import time

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from deadletters.services.archive import ArchiveLocked, archive_lock
from deadletters.services.restore import RestoreError, RestoreResult, restore_purge

PROGRESS_EVERY_SECONDS = 5.0


class Command(BaseCommand):
    help = (
        "Load the dead letters a purge exported back into the table, as archived letters. RUN is the "
        "run's folder in the archive storage, as archive_deadletters printed it and its purge audit "
        "entry names it (deadletters-<time>-<pid>). Every part is checked before anything of it is "
        "loaded (the sha256 its purge recorded, gzip's CRC, one JSON object per line, every column and "
        "its type) and loaded in one transaction; a letter already in the table is left alone, so "
        "running it again restores nothing twice. A restored letter keeps its id and every exported "
        "column except archived_at, which becomes the time of the restore (the next purge would take "
        "it at once otherwise); a task row that is gone is made again as a dead task. Exits non-zero "
        "when a part is missing or damaged (the other parts are restored; run it again once the part "
        "is repaired) or when a letter's id is held by a different letter. Audited."
    )

    def add_arguments(self, parser):
        parser.add_argument("run", metavar="RUN",
                            help="the purge run, e.g. deadletters-20261124T031500123456Z-4242")
        parser.add_argument("--actor", required=True, help="who restores it, for the audit log")
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="check every part and count what would be restored, already present, or in conflict; "
            "write nothing",
        )

    def handle(self, *args, **options):
        self.verbosity = options["verbosity"]
        self._last_progress = time.monotonic()
        actor = options["actor"].strip()
        if not actor:
            raise CommandError(_("--actor must name who restores the run"))
        run = options["run"].strip().strip("/")
        try:
            if options["dry_run"]:
                result = restore_purge(run=run, actor=actor, dry_run=True, progress=self._progress)
            else:
                # The purge's lock: a purge running meanwhile could take back what is being restored.
                with archive_lock():
                    result = restore_purge(run=run, actor=actor, progress=self._progress)
        except ArchiveLocked as exc:
            message = _("%(why)s: a purge or another restore is running; run this again when it ends")
            raise CommandError(message % {"why": exc}) from None
        except RestoreError as exc:
            raise CommandError(str(exc)) from None
        self._summary(result)
        if not result.ok:
            raise CommandError(self._failure(result))

    def _say(self, line: str, level: int = 1) -> None:
        if self.verbosity >= level:
            self.stdout.write(line)
            self.stdout.flush()

    def _progress(self, result: RestoreResult, report) -> None:
        if report.error:
            message = _("part %(part)s: %(error)s; nothing of it was loaded")
            self.stderr.write(message % {"part": report.number, "error": report.error})
            return
        now = time.monotonic()
        every_part = self.verbosity >= 2
        recent = now - self._last_progress < PROGRESS_EVERY_SECONDS
        if not every_part and recent and result.parts_done < result.parts:
            return
        self._last_progress = now
        self._say(
            _("%(done)d of %(parts)d parts: %(restored)d letters restored, %(present)d already present (part %(part)d: %(letters)d letters)")  # noqa: E501
            % {
                "done": result.parts_done + len(result.bad_parts),
                "parts": result.parts,
                "restored": result.restored,
                "present": result.present,
                "part": report.number,
                "letters": report.letters,
            }
        )

    def _summary(self, result: RestoreResult) -> None:
        values = {
            "run": result.run,
            "restored": result.restored,
            "present": result.present,
            "done": result.parts_done,
            "parts": result.parts,
            "tasks": result.tasks_made,
        }
        line = (
            _("dry run of %(run)s: %(restored)d letters would be restored, %(present)d are already present; %(done)d of %(parts)d parts intact; %(tasks)d task rows would be made again")  # noqa: E501
            if result.dry_run
            else _("restored %(restored)d dead letters of %(run)s as archived; %(present)d were already present; %(done)d of %(parts)d parts loaded; %(tasks)d task rows made again")  # noqa: E501
        ) % values
        self._say(line)
        if not result.checksums:
            self._say(_("this purge recorded no checksums (an earlier release): each part was checked by gzip's CRC and its content only"))  # noqa: E501

    def _failure(self, result: RestoreResult) -> str:
        problems = [f"{report.name}: {report.error}" for report in result.bad_parts]
        if result.conflicts:
            problems.append(
                _("%(n)d letters were not restored: their ids are held by different dead letters (another database?)") % {"n": result.conflicts}  # noqa: E501
            )
        head = _("the restore of %(run)s is incomplete:") % {"run": result.run}
        return head + "\n  " + "\n  ".join(problems)
