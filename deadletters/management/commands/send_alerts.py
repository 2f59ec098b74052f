import logging

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db.utils import OperationalError
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from redis.exceptions import RedisError

from config.looping import run_passes
from deadletters.alerts.sender import retry_failed_alerts, send_due_alerts

logger = logging.getLogger("deadletters.alerts")


class Command(BaseCommand):
    help = (
        "Deliver the alert outbox (one send pass by default) to every channel: the DingTalk robot "
        "(DINGTALK_*) and ALERT_CHANNELS, each on its own budget (DingTalk: DINGTALK_RATE_PER_MINUTE, "
        "shared by all senders through Redis). A cause gets one card, its further deaths one "
        "follow-up; a storm is coalesced into digests, so every death is counted in some sent message. "
        "Refused sends are retried with backoff (DINGTALK_RETRY_BACKOFF) up to "
        "DINGTALK_MAX_SEND_ATTEMPTS; a channel that does not answer is probed until it does, then "
        "drained oldest first. Safe to run on several machines at once, and from cron."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--loop", action="store_true", help="run forever, one pass every --interval seconds"
        )
        parser.add_argument(
            "--interval",
            type=float,
            default=settings.ALERTS_SEND_INTERVAL,
            help="seconds between passes with --loop (default %(default)s, ALERTS_SEND_INTERVAL)",
        )
        parser.add_argument(
            "--retry-failed",
            action="store_true",
            help="first put failed alert messages back to pending (fresh attempts, same msgUuid) "
            "and lift a configuration-error pause, then send",
        )

    def handle(self, *args, loop, interval, retry_failed, verbosity, **options):
        if interval <= 0:
            self.stderr.write(_("--interval must be positive"))
            raise SystemExit(2)
        if retry_failed:
            count = retry_failed_alerts()
            self.stdout.write(
                ngettext(
                    "%(n)d failed alert put back to pending", "%(n)d failed alerts put back to pending", count
                )
                % {"n": count}
            )
        run_passes(lambda: self._one_pass(loop, verbosity), loop=loop, interval=interval)

    def _one_pass(self, loop: bool, verbosity: int) -> None:
        try:
            reports = send_due_alerts()
        except (RedisError, OperationalError) as exc:
            if not loop:
                raise
            logger.error("alert pass failed, will try again: %s", exc)
            return
        if not reports and verbosity >= 1 and not loop:
            self.stdout.write(_("no alert channel configured: alerts are recorded as skipped"))
        for one in reports:
            if verbosity >= 2 or (verbosity >= 1 and (not loop or one.did_something)):
                self.stdout.write(one.summary())
