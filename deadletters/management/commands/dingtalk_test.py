import os
import time
import uuid

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from redis.exceptions import RedisError

from config.redis_client import make_redis_client
from deadletters.alerts import render, wire
from deadletters.alerts.channels import dingtalk_channel
from deadletters.alerts.state import CONFIG, ChannelState


def _budget(channel) -> ChannelState:
    """The robot's shared budget, from a Redis asked once with a short timeout: before the first
    `manage.py up` there is none, and saying so at once beats waiting on its retries."""
    conn = make_redis_client(
        settings.REDIS_URL, connect_timeout=1.0, socket_timeout=2.0, retries=0, backoff_cap=0
    )
    try:
        conn.ping()
    except (RedisError, OSError) as exc:
        raise CommandError(
            _(
                "Redis does not answer (%(error)s): the robot's budget of %(rate)d messages a minute is kept "
                "there. Start the site first (manage.py up), or set REDIS_URL to a running Redis."
            )
            % {"error": type(exc).__name__, "rate": channel.rate_per_minute}
        ) from None
    return ChannelState(conn, channel)


class Command(BaseCommand):
    help = (
        "Send one test message to the DingTalk robot configured by DINGTALK_WEBHOOK (with "
        "DINGTALK_SECRET and DINGTALK_KEYWORD when set) and print DingTalk's answer. Exit status 0 "
        "when DingTalk accepted it. Use it when setting up a robot: errcode 310000 means a wrong "
        "secret, a missing keyword or a server clock more than an hour off."
    )

    def add_arguments(self, parser):
        parser.add_argument("--text", default="", help="extra line to put in the test message")

    def handle(self, *args, text, **options):
        channel = dingtalk_channel()
        if channel is None:
            raise CommandError(
                _("DINGTALK_WEBHOOK is not set: alerts are recorded as skipped, nothing is sent")
            )
        state = _budget(channel)
        if state.acquire() is None:
            raise CommandError(
                _("the robot's budget of %(rate)d messages a minute is spent; try again in %(seconds).0fs")
                % {"rate": channel.rate_per_minute, "seconds": state.seconds_until_slot()}
            )
        with translation.override(settings.ALERT_LANGUAGE):
            card = render.test_card(timezone.now())
        if text:
            card["lines"].append(text)
        base = settings.CONSOLE_BASE_URL
        if os.environ.get("CONSOLE_BASE_URL", "").strip():
            self.stdout.write(_("the card's links open %(base)s (CONSOLE_BASE_URL)") % {"base": base})
        else:
            self.stdout.write(
                _(
                    "CONSOLE_BASE_URL is not set: the card's links open %(base)s; set it to the console's address"  # noqa: E501
                )
                % {"base": base}
            )
        self.stdout.write(
            _(
                "sending a test message to robot %(robot)s (signed: %(signed)s, keyword: %(keyword)s, timeout %(timeout)ss)"  # noqa: E501
            )
            % {
                "robot": channel.key,
                "signed": _("yes") if channel.secret else _("no"),
                "keyword": _("yes") if channel.keyword else _("no"),
                "timeout": f"{channel.timeout:g}",
            }
        )
        started = time.monotonic()
        result = wire.send(channel, card, msg_uuid=str(uuid.uuid4()))
        elapsed = time.monotonic() - started
        self.stdout.write(
            _("HTTP status: %(status)s  (%(seconds).2fs)")
            % {"status": result.http_status or "-", "seconds": elapsed}
        )
        self.stdout.write(_("DingTalk answer: %(answer)s") % {"answer": result.answer or "-"})
        if result.ok:
            if (state.recorded() or {}).get("kind") == CONFIG:
                state.clear_pause()
            self.stdout.write(self.style.SUCCESS(_("OK: DingTalk accepted the message")))
            return
        if result.outcome == wire.CONFIG:
            state.pause(
                CONFIG,
                settings.DINGTALK_CONFIG_ERROR_PAUSE_SECONDS,
                f"configuration rejected: {result.error}",
            )
            hint = _("check DINGTALK_SECRET, DINGTALK_KEYWORD and the server clock")
        elif result.outcome == wire.THROTTLED:
            hint = _("DingTalk throttles this robot for 10 minutes after more than 20 messages a minute")
        else:
            hint = _("check the webhook URL and the network")
        raise CommandError(
            _("DingTalk did not accept the message: %(error)s (%(hint)s)")
            % {"error": result.error, "hint": hint}
        )
