import json
import time

from django.core.management.base import BaseCommand, CommandError

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
            raise CommandError("DINGTALK_WEBHOOK is not set: alerts are recorded as skipped, nothing is sent")
        title, payload = messages.render_test(robot)
        if text:
            card = payload.get("actionCard") or payload.get("markdown")
            card["text"] += f"\n\n{text}"
        state = None
        try:
            state = RobotState(redis_connection(), robot)
            if state.acquire() is None:
                raise CommandError(
                    f"the robot's budget of {robot.rate_per_minute} messages a minute is spent; "
                    f"try again in {state.seconds_until_slot():.0f}s"
                )
        except CommandError:
            raise
        except Exception as exc:  # Redis down must not stop an operator from testing the robot
            self.stderr.write(f"(rate limiter unavailable, sending anyway: {type(exc).__name__})")
            state = None
        self.stdout.write(
            f"sending a test message to robot {robot.robot_key} "
            f"(signed: {'yes' if robot.secret else 'no'}, keyword: {'yes' if robot.keyword else 'no'}, "
            f"timeout {robot.timeout:g}s)"
        )
        started = time.monotonic()
        result = dingtalk.send(robot, payload)
        elapsed = time.monotonic() - started
        answer = json.dumps(result.answer, ensure_ascii=False) if result.answer else "-"
        self.stdout.write(f"HTTP status: {result.http_status or '-'}  ({elapsed:.2f}s)")
        self.stdout.write(f"DingTalk answer: {answer}")
        if result.ok:
            if state is not None:
                state.clear_config_error()
            self.stdout.write(self.style.SUCCESS("OK: DingTalk accepted the message"))
            return
        if result.config_error:
            if state is not None:
                from django.conf import settings

                state.set_config_error(
                    errcode=result.errcode,
                    error=result.error,
                    seconds=settings.DINGTALK_CONFIG_ERROR_PAUSE_SECONDS,
                )
            hint = "check DINGTALK_SECRET, DINGTALK_KEYWORD and the server clock"
        elif result.throttled:
            hint = "DingTalk throttles this robot for 10 minutes after more than 20 messages a minute"
        else:
            hint = "check the webhook URL and the network"
        raise CommandError(f"DingTalk did not accept the message: {result.error} ({hint})")
