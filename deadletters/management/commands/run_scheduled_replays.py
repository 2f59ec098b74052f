import logging

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db.utils import OperationalError
from django.utils.translation import gettext as _
from redis.exceptions import RedisError

from config.looping import run_passes
from deadletters.bulk.canary import decide_canaries
from deadletters.bulk.schedule import promote_due_bulk_actions

logger = logging.getLogger("deadletters.bulk")


class Command(BaseCommand):
    help = (
        "Start the scheduled bulk runs (and scheduled single replays) whose time has come, and give "
        "the verdict of canary replays whose outcome is certain (carry on, or stop as canary_failed). "
        "One pass by default; --loop polls every REPLAY_PLANNER_INTERVAL seconds (0.5), so a run "
        "starts within a second of its time. Safe to run on several machines: each start and each "
        "verdict is a conditional update one of them wins. The reaper loop does the same every few "
        "seconds as a backstop."
    )

    def add_arguments(self, parser):
        parser.add_argument("--loop", action="store_true", help="run forever (SIGTERM or Ctrl-C stops)")
        parser.add_argument(
            "--interval",
            type=float,
            default=settings.REPLAY_PLANNER_INTERVAL,
            help="seconds between passes with --loop (default %(default)s, REPLAY_PLANNER_INTERVAL)",
        )

    def handle(self, *args, loop, interval, verbosity, **options):
        if interval <= 0:
            self.stderr.write(_("--interval must be positive"))
            raise SystemExit(2)
        if loop and verbosity >= 1:
            self.stdout.write(
                _("starting scheduled bulk runs and deciding canaries every %(interval)ss")
                % {"interval": f"{interval:g}"}
            )
        run_passes(lambda: self._one_pass(loop, verbosity), loop=loop, interval=interval)

    def _one_pass(self, loop: bool, verbosity: int) -> None:
        try:
            started = promote_due_bulk_actions()
            decided = decide_canaries()
        except (RedisError, OperationalError) as exc:
            if not loop:
                raise
            logger.error("planner pass failed, will try again: %s", exc)
            return
        if verbosity >= 2 or (verbosity >= 1 and (started or decided or not loop)):
            self.stdout.write(
                _("%(started)d scheduled run(s) started, %(decided)d canary verdict(s) given")
                % {"started": len(started), "decided": len(decided)}
            )
