import logging

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db.utils import OperationalError
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from redis.exceptions import RedisError

from config.looping import run_passes
from deadletters.alerts.channels.sender import retry_failed_channel_messages, send_channel_alerts
from deadletters.alerts.resolved import announce_resolved_causes
from deadletters.alerts.sender import retry_failed_alerts, send_pending_alerts
from deadletters.alerts.snooze import announce_ended_snoozes

logger = logging.getLogger("deadletters.alerts")


class Command(BaseCommand):
    help = (
        "Deliver pending alerts from the outbox (one send pass by default), to the DingTalk robot and "
        "to every channel of ALERT_CHANNELS, each on its own budget. Each dead letter "
        "gets a signed actionCard while the robot's budget (DINGTALK_RATE_PER_MINUTE, shared by all "
        "senders through Redis) allows; a storm is coalesced into digests grouped by error "
        "fingerprint, so every dead letter is counted in some sent message. Failed sends are retried "
        "with backoff (DINGTALK_RETRY_BACKOFF) up to DINGTALK_MAX_SEND_ATTEMPTS, then marked failed; "
        "DingTalk's 130101 (too fast) pauses the robot for DINGTALK_THROTTLE_BACKOFF_SECONDS; 310000 "
        "(signature/keyword/timestamp) is a configuration error that pauses sending. "
        "Safe to run on several machines at once, and from cron."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--loop",
            action="store_true",
            help="run forever, one pass every --interval seconds (Ctrl-C stops)",
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
            count = retry_failed_alerts() + retry_failed_channel_messages()
            self.stdout.write(
                ngettext("%(n)d failed alert put back to pending", "%(n)d failed alerts put back to pending", count)
                % {"n": count}
            )
        if loop and verbosity >= 1:
            self.stdout.write(_("sending DingTalk alerts every %(interval)ss") % {"interval": f"{interval:g}"})
        run_passes(lambda: self._one_pass(loop, verbosity), loop=loop, interval=interval)

    def _one_pass(self, loop: bool, verbosity: int) -> None:
        try:
            announce_resolved_causes()
            announce_ended_snoozes()
            report = send_pending_alerts()
            reports = [report, *send_channel_alerts()]
        except (RedisError, OperationalError) as exc:
            if not loop:
                raise
            logger.error("alert pass failed, will try again: %s", exc)
        else:
            for one in reports:
                if verbosity >= 2 or (verbosity >= 1 and (not loop or one.did_something)):
                    self.stdout.write(one.summary())
