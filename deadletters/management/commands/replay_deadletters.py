import json
import time

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from deadletters.audit import ReasonRequired
from deadletters.bulk.canary import canary_view
from deadletters.bulk.control import FINISHED_STATUSES, start_bulk_action
from deadletters.bulk.patch import parse_params_patch, preview_params_patch
from deadletters.bulk.pause_reasons import pause_reason_words
from deadletters.bulk.plans import check_canary_fits, parse_start_at, validate_canary, validate_canary_success
from deadletters.bulk.selection import (
    SCOPE_FILTER,
    SCOPE_SELECTED,
    InvalidBulkRequest,
    build_selection,
    preview_bulk_action,
)
from deadletters.management.filter_options import add_filter_options, filters_from_options
from deadletters.models import BulkAction, BulkActionStatus
from deadletters.services.letters import DeadLetterNotFound
from deadletters.services.replay import replay_dead_letter
from reports.services import TaskNotReplayable
from reports.wording import status_word

ENDED = (*FINISHED_STATUSES, BulkActionStatus.PAUSED)
FOLLOW_EVERY_SECONDS = 2


class Command(BaseCommand):
    help = (
        "Replay dead letters: the ones named by --id, or every letter a filter matches (the console's "
        "list filter) as a bulk replay the workers run at --rate per second, which this command "
        "follows until it ends (--no-wait: start it and return). --canary K replays K letters first "
        "and carries on only when --canary-success of them end done (exit 1 when the canary fails); "
        "--at schedules the replay instead (ISO 8601 with its offset) and returns. --patch edits the "
        "params of every letter first (set, replace, remove; see docs/runbook.md). --dry-run only "
        "counts (and checks the patch). Exits 1 when something was not replayed."
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
            "--canary",
            default=None,
            metavar="K",
            help="replay K letters first, wait for their outcome, then carry on or stop (canary_failed)",
        )
        parser.add_argument(
            "--canary-success",
            default=None,
            metavar="SHARE",
            help="the share of the canary that must end done, 0 to 1 (default BULK_CANARY_SUCCESS, 0.8)",
        )
        parser.add_argument(
            "--at",
            default=None,
            metavar="TIME",
            help="start at TIME, ISO 8601 with its UTC offset (2026-11-25T02:00+08:00); "
            "cancellable until then",
        )
        parser.add_argument(
            "--patch",
            default=None,
            metavar="JSON",
            help='edit every letter\'s params: {"set": {...}, "replace": {"key": {"from": "a", "to": "b"}}, '
            '"remove": [...]}; letters it makes invalid are not replayed',
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would be replayed; change nothing"
        )
        parser.add_argument("--no-wait", action="store_true", help="start a filtered replay and return")
        parser.add_argument("--include-superseded", action="store_true",
                            help="replay superseded letters too (a later task of the same report ended done)")
        add_filter_options(parser)

    def handle(self, *args, ids, reason, actor, rate, canary, canary_success, at, patch, dry_run, no_wait,
               verbosity, include_superseded, **options):
        try:
            plan = {
                "canary": validate_canary(canary, action="replay") or None,
                "canary_success": validate_canary_success(canary_success),
                "start_at": parse_start_at(at),
                "params_patch": parse_params_patch(patch),
            }
        except InvalidBulkRequest as exc:
            raise CommandError(_option_message(exc)) from None
        if canary_success is not None and not plan["canary"]:
            raise CommandError(_("--canary-success goes with --canary K"))
        planned = bool(plan["canary"] or plan["start_at"] or plan["params_patch"])
        if ids and not planned:
            return self._replay_ids(ids, reason=reason, actor=actor, dry_run=dry_run)
        try:
            selection = self._selection(ids, options, include_superseded)
        except InvalidBulkRequest as exc:
            raise CommandError(_option_message(exc)) from None
        if dry_run:
            preview = preview_bulk_action(selection=selection)
            count = preview.count
            try:
                if plan["canary"]:
                    check_canary_fits(plan["canary"], count)
            except InvalidBulkRequest as exc:
                raise CommandError(_option_message(exc)) from None
            self.stdout.write(
                ngettext("%(n)d dead letter would be replayed", "%(n)d dead letters would be replayed", count)
                % {"n": count}
                + (_(" (%(n)d superseded left out: --include-superseded)") % {"n": preview.superseded}
                   if preview.superseded else "")
            )
            if plan["params_patch"]:
                self._preview_patch(selection, plan["params_patch"])
            return
        try:
            bulk, _created = start_bulk_action(
                selection=selection,
                actor=actor,
                ip_address=None,
                reason=reason,
                rate_per_second=rate,
                source="cli",
                **plan,
            )
        except InvalidBulkRequest as exc:
            raise CommandError(_option_message(exc)) from None
        except ReasonRequired as exc:
            raise CommandError(str(exc)) from None
        if bulk.status == BulkActionStatus.SCHEDULED:
            self.stdout.write(
                _("bulk replay %(id)s scheduled for %(at)s (in %(wait)s): %(n)d dead letters at %(rate)s/s")
                % {
                    "id": bulk.public_id,
                    "at": bulk.start_at.isoformat(),
                    "wait": _seconds_until(bulk.start_at),
                    "n": bulk.total,
                    "rate": bulk.rate_per_second,
                }
                + (_(", canary %(k)d") % {"k": bulk.canary_size} if bulk.canary_size else "")
                + _(". Cancel it from the console's Bulk actions, or POST /report/bulk/<id>/cancel.")
            )
            return
        self.stdout.write(
            ngettext(
                "bulk replay %(id)s started: %(n)d dead letter at %(rate)s/s",
                "bulk replay %(id)s started: %(n)d dead letters at %(rate)s/s",
                bulk.total,
            )
            % {"id": bulk.public_id, "n": bulk.total, "rate": bulk.rate_per_second}
            + (
                _(", canary of %(k)d first (%(share)s must succeed)")
                % {"k": bulk.canary_size, "share": f"{bulk.canary_success:.0%}"}
                if bulk.canary_size
                else ""
            )
        )
        if not no_wait:
            self._follow(bulk.pk, verbosity)

    @staticmethod
    def _selection(ids, options, include_superseded):
        if ids:
            return build_selection(action="replay", scope=SCOPE_SELECTED, ids=ids,
                                   include_superseded=include_superseded)
        filters = filters_from_options(options)
        if not filters.is_narrowed:
            raise CommandError(
                _("name dead letters with --id or narrow the filter (--kind, --fingerprint, ...)"))
        return build_selection(action="replay", scope=SCOPE_FILTER, filter_qs=filters.querystring(),
                               include_superseded=include_superseded)

    def _preview_patch(self, selection, patch) -> None:
        preview = preview_params_patch(selection, patch, can_see=True)
        self.stdout.write(
            _("the patch changes the params of %(changed)d of the %(checked)d tasks checked; %(invalid)d "
              "would be refused") % {"changed": preview.changed, "checked": preview.checked,
                                     "invalid": preview.invalid})
        for row in preview.sample:
            self.stdout.write(f"  #{row['dead_letter']}: {json.dumps(row['before'], ensure_ascii=False)} -> "
                              f"{json.dumps(row['after'], ensure_ascii=False)}")
        for refusal in preview.refusals:
            self.stdout.write("  " + _refusal_line(refusal))

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
                self.stderr.write(
                    _("dead letter %(id)s not replayed: there is no such dead letter") % {"id": letter_id})
            except (TaskNotReplayable, ReasonRequired) as exc:
                failed += 1
                self.stderr.write(
                    _("dead letter %(id)s not replayed: %(why)s") % {"id": letter_id, "why": exc})
        if failed:
            raise CommandError(
                _("%(failed)d of %(n)d dead letters not replayed") % {"failed": failed, "n": len(ids)})

    def _follow(self, bulk_id: int, verbosity: int) -> None:
        """Print progress until the bulk ends (and, while it waits on its canary, what the canary's
        replays did so far); no worker means no progress, which it says."""
        last = None
        while True:
            bulk = BulkAction.objects.get(pk=bulk_id)
            line = _progress_line(bulk)
            if verbosity >= 1 and line != last:
                self.stdout.write(line)
                last = line
            if bulk.status in ENDED:
                break
            time.sleep(FOLLOW_EVERY_SECONDS)
        if bulk.status == BulkActionStatus.COMPLETED and bulk.refused:
            raise CommandError(
                ngettext("%(n)d dead letter not replayed: the patch made its params invalid (%(first)s)",
                         "%(n)d dead letters not replayed: the patch made their params invalid (%(first)s)",
                         bulk.refused) % {"n": bulk.refused, "first": _refusal_line(bulk.refusals[0])})
        if bulk.status != BulkActionStatus.COMPLETED:
            why = (
                (bulk.canary_result or {}).get("reason")
                or pause_reason_words(bulk.paused_reason)
                or bulk.error
                or _("see the console")
            )
            raise CommandError(
                _("the bulk replay ended %(status)s: %(why)s")
                % {"status": status_word(bulk.status), "why": why}
            )


def _progress_line(bulk: BulkAction) -> str:
    canary = canary_view(bulk)
    if bulk.status == BulkActionStatus.CANARY and canary:
        deadline = timezone.localtime(canary["deadline"]).strftime("%H:%M:%S") if canary["deadline"] else "?"
        return _(
            "canary: %(done)d of %(replayed)d replayed tasks done, %(died)d died again, %(unfinished)d "
            "unfinished (%(needed)d must be done; decided by %(deadline)s at the latest)"
        ) % {
            "done": canary["done"],
            "replayed": canary["replayed"],
            "died": canary["died_again"],
            "unfinished": canary["unfinished"],
            "needed": canary["needed"],
            "deadline": deadline,
        }
    line = _("%(status)s: %(processed)d of %(total)d (%(percent)d%%), %(succeeded)d replayed") % {
        "status": status_word(bulk.status),
        "processed": bulk.processed,
        "total": bulk.total,
        "percent": bulk.percent,
        "succeeded": bulk.succeeded,
    }
    if canary and canary["phase"] in ("passed", "failed"):
        line += f"; {canary['reason']}"
    return line


def _refusal_line(refusal: dict) -> str:
    reasons = "; ".join(f"{name}: {message}" for name, message in refusal["reasons"])
    return _("#%(id)s refused: %(reasons)s") % {"id": refusal["dead_letter"], "reasons": reasons}


def _seconds_until(moment) -> str:
    seconds = max(0, int((moment - timezone.now()).total_seconds()))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m{rest % 60:02d}s"


def _option_message(exc: InvalidBulkRequest) -> str:
    option = {"start_at": "--at", "canary": "--canary", "canary_success": "--canary-success",
              "params_patch": "--patch"}.get(exc.field)
    return f"{option} {exc.message}" if option else str(exc)
