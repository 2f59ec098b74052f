"""How alert delivery is doing, for the console's dashboard and /metrics: the outbox by status, the
last send and the last error, and per channel what Redis knows (its pause and why, its budget)."""

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import Count, Min
from redis.exceptions import RedisError

from config.backoff import backoff_delay
from deadletters.alerts.channels import DINGTALK, configured_channels
from deadletters.alerts.state import CONFIG, THROTTLED, ChannelState
from deadletters.models import Alert, AlertMessage, AlertStatus
from transport.connection import redis_connection


@dataclass
class ChannelStatus:
    name: str
    type: str
    pending: int = 0
    failed: int = 0
    paused: str = ""  # throttled | config | down, or ""
    reason: str = ""  # why, in the service's words (a 3xx says the redirect was not followed)
    paused_until: datetime | None = None
    sent_last_minute: int | None = None
    rate_per_minute: int = 0


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
    config_error: str = ""  # non-empty: a channel rejects our configuration
    throttled_until: datetime | None = None
    sent_last_minute: int | None = None
    rate_per_minute: int = 0
    channels: list[ChannelStatus] = field(default_factory=list)

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


def _by(model, **filters) -> dict:
    rows = model.objects.filter(**filters).values_list("status").annotate(n=Count("id"))
    return dict(rows.values_list("status", "n"))


def alert_health(*, clock=time.time) -> AlertHealth:
    channels = configured_channels()
    health = AlertHealth(configured=bool(channels))
    health.alerts_by_status = _by(Alert)
    health.messages_by_status = _by(AlertMessage)
    health.oldest_pending_at = Alert.objects.filter(status=AlertStatus.PENDING).aggregate(
        m=Min("created_at")
    )["m"]
    last_sent = AlertMessage.objects.filter(status=AlertStatus.SENT).order_by("-sent_at").first()
    health.last_sent_at = last_sent.sent_at if last_sent else None
    last_bad = AlertMessage.objects.exclude(last_error="").exclude(last_errcode=0).order_by("-id").first()
    if last_bad is not None:
        health.last_error, health.last_errcode = last_bad.last_error, last_bad.last_errcode
        health.last_error_at = last_failure_at(last_bad)
    for channel in channels:
        rows = _by(Alert, channel=channel.name)
        status = ChannelStatus(channel.name, channel.type, rows.get("pending", 0), rows.get("failed", 0))
        status.rate_per_minute = channel.rate_per_minute
        try:
            state = ChannelState(redis_connection(), channel, clock=clock)
            paused, status.sent_last_minute = state.paused(), state.used()
        except RedisError:
            paused = None  # the console still shows what the database knows
        if paused:
            status.paused, status.reason = paused["kind"], paused["reason"]
            status.paused_until = datetime.fromtimestamp(float(paused["until"]), tz=UTC)
            if status.paused == CONFIG:
                health.config_error = health.config_error or f"{status.name}: {status.reason}"
        if status.paused == THROTTLED and status.name == DINGTALK:
            health.throttled_until = status.paused_until
        if status.name == DINGTALK or len(channels) == 1:
            health.sent_last_minute, health.rate_per_minute = status.sent_last_minute, channel.rate_per_minute
        health.channels.append(status)
    # The database keeps a configuration error even when Redis is flushed: a message failed with
    # it and nothing was sent since.
    if (
        not health.config_error
        and last_bad is not None
        and last_bad.status == AlertStatus.FAILED
        and last_bad.last_errcode
        in (310000, 19021, 19022, 19024, 93000, 401, 403, 404, 410, 301, 302, 307, 308)
        and (last_sent is None or last_sent.id < last_bad.id)
    ):
        health.config_error = f"{last_bad.channel}: {last_bad.last_error}"
    return health


def last_failure_at(message: AlertMessage) -> datetime | None:
    """When the message's last failed send happened. The sender records it in next_attempt_at:
    the failure time itself for a failed message, failure + delay for one waiting to retry."""
    if message.status == AlertStatus.FAILED:
        return message.next_attempt_at
    if message.status != AlertStatus.PENDING or not message.last_error:
        return None
    if message.last_errcode == 130101:
        delay = settings.DINGTALK_THROTTLE_BACKOFF_SECONDS
    else:
        delay = backoff_delay(message.attempts, settings.DINGTALK_RETRY_BACKOFF)
    return message.next_attempt_at - timedelta(seconds=delay)
