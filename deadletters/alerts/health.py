"""How alert delivery is doing, for the console's dashboard, /metrics and the API: the outbox by
status, the last send and the last error, and per channel what Redis knows (its pause and why, its
budget) and what its messages say: its last delivery, and since when its sends fail (a send failed
and none was delivered after it). A failing channel does not ping its heartbeat (heartbeat.py)."""

import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db.models import Count, Min
from redis.exceptions import RedisError

from config.backoff import backoff_delay
from deadletters.alerts.channels import DINGTALK, configured_channels
from deadletters.alerts.state import CONFIG, THROTTLED, ChannelState
from deadletters.models import Alert, AlertMessage, AlertPath, AlertStatus
from transport.connection import redis_connection

CONFIG_ERRCODES = frozenset({310000, 19021, 19022, 19024, 93000, 401, 403, 404, 410, 301, 302, 307, 308})


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
    last_sent_at: datetime | None = None
    failing_since: datetime | None = None
    failing_errcode: int | None = None
    failing_error: str = ""
    heartbeat_minutes: int | None = None  # None: no heartbeat_url
    pinged_at: datetime | None = None
    daily_digest_at: str = ""
    digest_day: date | None = None

    @property
    def failing(self) -> bool:
        return self.failing_since is not None


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
    paths = {p.channel: p for p in AlertPath.objects.all()}
    for channel in channels:
        rows = _by(Alert, channel=channel.name)
        status = ChannelStatus(channel.name, channel.type, rows.get("pending", 0), rows.get("failed", 0))
        status.rate_per_minute = channel.rate_per_minute
        channel_delivery(status)
        path = paths.get(channel.name) or AlertPath()
        status.heartbeat_minutes = channel.heartbeat_minutes if channel.heartbeat_url else None
        status.pinged_at, status.digest_day = path.pinged_at, path.digest_day
        status.daily_digest_at = channel.daily_digest_at
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
    # The database keeps a configuration error even when Redis is flushed: a channel's message
    # failed with it and nothing was sent since.
    refused = [c for c in health.channels if c.failing_errcode in CONFIG_ERRCODES]
    if not health.config_error and refused:
        health.config_error = f"{refused[0].name}: {refused[0].failing_error}"
    return health


def channel_delivery(status: ChannelStatus) -> ChannelStatus:
    """Fill in the channel's last delivery and, when a send failed after it, since when it fails
    and the newest failure's code and words. A refused message counts (its attempts used up); one
    only held back by the service's throttle does not."""
    messages = AlertMessage.objects.filter(channel=status.name)
    # A sent message's next_attempt_at is the lease taken just before its send: the index finds it.
    sent = messages.filter(status=AlertStatus.SENT).order_by("-next_attempt_at")
    status.last_sent_at = sent.values_list("sent_at", flat=True).first()
    bad = messages.filter(status__in=(AlertStatus.PENDING, AlertStatus.FAILED), attempts__gt=0).exclude(
        last_error=""
    )
    failures = [(last_failure_at(m) or m.created_at, m) for m in bad.order_by("-id")[:100]]
    failures = [(at, m) for at, m in failures if status.last_sent_at is None or at > status.last_sent_at]
    if failures:
        _at, newest = max(failures, key=lambda pair: pair[0])
        first = min(m.created_at for _, m in failures)
        status.failing_since = max(first, status.last_sent_at) if status.last_sent_at else first
        status.failing_errcode, status.failing_error = newest.last_errcode, newest.last_error
    return status


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
