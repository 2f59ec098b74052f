import json
import time

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from deadletters.alerts import client as dingtalk
from deadletters.alerts import messages
from deadletters.alerts.client import RobotConfig
from deadletters.alerts.ratelimit import RobotState
from transport.connection import redis_connection


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
        robot = RobotConfig.from_settings()
        if not robot.configured:
            raise CommandError(_("DINGTALK_WEBHOOK is not set: alerts are recorded as skipped, nothing is sent"))
        title, payload = messages.render_test(robot)
        if text:
            card = payload.get("actionCard") or payload.get("markdown")
            card["text"] += f"\n\n{text}"
        state = None
        try:
            state = RobotState(redis_connection(), robot)
            if state.acquire() is None:
                raise CommandError(
                    _("the robot's budget of %(rate)d messages a minute is spent; try again in %(seconds).0fs")
                    % {"rate": robot.rate_per_minute, "seconds": state.seconds_until_slot()}
                )
        except CommandError:
            raise
        except Exception as exc:  # Redis down must not stop an operator from testing the robot
            self.stderr.write(_("(rate limiter unavailable, sending anyway: %(error)s)") % {"error": type(exc).__name__})
            state = None
        self.stdout.write(
            _("sending a test message to robot %(robot)s (signed: %(signed)s, keyword: %(keyword)s, timeout %(timeout)ss)")
            % {
                "robot": robot.robot_key,
                "signed": _("yes") if robot.secret else _("no"),
                "keyword": _("yes") if robot.keyword else _("no"),
                "timeout": f"{robot.timeout:g}",
            }
        )
        started = time.monotonic()
        result = dingtalk.send(robot, payload)
        elapsed = time.monotonic() - started
        answer = json.dumps(result.answer, ensure_ascii=False) if result.answer else "-"
        self.stdout.write(_("HTTP status: %(status)s  (%(seconds).2fs)") % {"status": result.http_status or "-", "seconds": elapsed})
        self.stdout.write(_("DingTalk answer: %(answer)s") % {"answer": answer})
        if result.ok:
            if state is not None:
                state.clear_config_error()
            self.stdout.write(self.style.SUCCESS(_("OK: DingTalk accepted the message")))
            return
        if result.config_error:
            if state is not None:
                from django.conf import settings

                state.set_config_error(
                    errcode=result.errcode,
                    error=result.error,
                    seconds=settings.DINGTALK_CONFIG_ERROR_PAUSE_SECONDS,
                )
            hint = _("check DINGTALK_SECRET, DINGTALK_KEYWORD and the server clock")
        elif result.throttled:
            hint = _("DingTalk throttles this robot for 10 minutes after more than 20 messages a minute")
        else:
            hint = _("check the webhook URL and the network")
        raise CommandError(_("DingTalk did not accept the message: %(error)s (%(hint)s)") % {"error": result.error, "hint": hint})
