"""How DingTalk delivery is doing, for the console's dashboard: the outbox by status, the last
send and the last error, and what Redis knows (throttling, configuration errors, the minute's budget)."""

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import Count, Min
from redis.exceptions import RedisError

from deadletters.alerts.client import CONFIG_ERRCODES, THROTTLED_ERRCODE, RobotConfig
from deadletters.alerts.ratelimit import RobotState
from deadletters.alerts.sender import send_retry_delay
from deadletters.models import Alert, AlertMessage, AlertStatus
from transport.connection import redis_connection


@dataclass
class AlertHealth:
    configured: bool
    alerts_by_status: dict[str, int] = field(default_factory=dict)
    messages_by_status: dict[str, int] = field(default_factory=dict)
    oldest_pending_at: datetime | None = None
    last_sent_at: datetime | None = None
    last_error: str = ""
    last_errcode: int | None = None
    last_error_at: datetime | None = None
    config_error: str = ""  # non-empty: DingTalk rejected the signature/keyword/timestamp
    throttled_until: datetime | None = None
    sent_last_minute: int | None = None
    rate_per_minute: int = 20

    @property
    def pending(self) -> int:
        return self.alerts_by_status.get(AlertStatus.PENDING, 0)

    @property
    def failed(self) -> int:
        return self.alerts_by_status.get(AlertStatus.FAILED, 0)

    @property
    def skipped(self) -> int:
        return self.alerts_by_status.get(AlertStatus.SKIPPED, 0)

    @property
    def ok(self) -> bool:
        return self.configured and not self.config_error and not self.failed


def alert_health(*, robot: RobotConfig | None = None, clock=time.time) -> AlertHealth:
    robot = robot or RobotConfig.from_settings()
    health = AlertHealth(configured=robot.configured, rate_per_minute=robot.rate_per_minute)
    health.alerts_by_status = dict(
        Alert.objects.values_list("status").annotate(n=Count("id")).values_list("status", "n")
    )
    health.messages_by_status = dict(
        AlertMessage.objects.values_list("status").annotate(n=Count("id")).values_list("status", "n")
    )
    health.oldest_pending_at = Alert.objects.filter(status=AlertStatus.PENDING).aggregate(
        m=Min("created_at")
    )["m"]
    last_sent = AlertMessage.objects.filter(status=AlertStatus.SENT).order_by("-sent_at").first()
    health.last_sent_at = last_sent.sent_at if last_sent else None
    last_bad = AlertMessage.objects.exclude(last_error="").exclude(last_errcode=0).order_by("-id").first()
    if last_bad is not None:
        health.last_error = last_bad.last_error
        health.last_errcode = last_bad.last_errcode
        health.last_error_at = last_failure_at(last_bad)
    # The database keeps the config error even when Redis is flushed: a message failed with a
    # configuration errcode and nothing was sent since.
    if (
        last_bad is not None
        and last_bad.status == AlertStatus.FAILED
        and last_bad.last_errcode in CONFIG_ERRCODES
        and (last_sent is None or last_sent.id < last_bad.id)
    ):
        health.config_error = last_bad.last_error
    if robot.configured:
        try:
            state = RobotState(redis_connection(), robot, clock=clock)
            recorded = state.config_error()
            if recorded and recorded.get("active"):
                health.config_error = recorded.get("error", "") or health.config_error
            until = state.throttled_until()
            health.throttled_until = datetime.fromtimestamp(until, tz=UTC) if until else None
            health.sent_last_minute = state.used()
        except RedisError:
            pass  # the console still shows what the database knows
    return health


def last_failure_at(message: AlertMessage) -> datetime | None:
    """When the message's last failed send happened. The sender records it in next_attempt_at:
    the failure time itself for a failed message, failure + delay for one waiting to retry."""
    if message.status == AlertStatus.FAILED:
        return message.next_attempt_at
    if message.status != AlertStatus.PENDING or not message.last_error:
        return None
    if message.last_errcode == THROTTLED_ERRCODE:
        delay = settings.DINGTALK_THROTTLE_BACKOFF_SECONDS
    else:
        delay = send_retry_delay(message.attempts)
    return message.next_attempt_at - timedelta(seconds=delay)
