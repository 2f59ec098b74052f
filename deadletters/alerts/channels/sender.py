"""Delivering AlertDelivery rows, each channel on its own (rows: deadletters.alerts.channels.outbox).

Per channel, as the DingTalk sender does for its robot: resend the messages that are due; turn
new deliveries into one message each while the channel's budget allows, else into one digest
that counts every alert it carries (paced over the minute); for each message take a slot in the
channel's budget (Redis, shared by every sender), claim it with a conditional UPDATE that sets a
lease, send outside any transaction, then mark it. A crash between the send and the mark leaves
the message pending and it is resent with the same uuid when its lease ends: never lost.
A channel that answers "too fast", rejects its configuration or cannot be reached is paused in
Redis; the other channels go on.
"""

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Min

from deadletters.alerts.channels import email, http, render
from deadletters.alerts.channels.config import Channel, configured_channels
from deadletters.alerts.channels.http import CONFIG, REJECTED, THROTTLED, ChannelResult
from deadletters.alerts.channels.state import ChannelState
from deadletters.alerts.sender import send_retry_delay
from deadletters.models import Alert, AlertDelivery, AlertStatus, ChannelMessage
from transport.connection import redis_connection

logger = logging.getLogger("deadletters.alerts")
_STOP, _CONTINUE = "stop", "continue"


def _dt(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


@dataclass
class ChannelReport:
    channel: str
    sent_messages: int = 0
    sent_alerts: int = 0
    digests: int = 0
    retries_scheduled: int = 0
    failed_messages: int = 0
    waiting: int = 0
    paused: str = ""
    last_error: str = ""

    @property
    def did_something(self) -> bool:
        return bool(self.sent_messages or self.retries_scheduled or self.failed_messages)

    def summary(self) -> str:
        text = f"{self.channel}: sent {self.sent_messages} message(s) carrying {self.sent_alerts} alert(s)"
        if self.digests:
            text += f" ({self.digests} digest(s))"
        for count, what in (
            (self.retries_scheduled, "to retry"),
            (self.failed_messages, "failed"),
            (self.waiting, "waiting"),
        ):
            if count:
                text += f", {count} {what}"
        if self.paused:
            text += f", paused: {self.paused}"
        return text


class _ChannelSender:
    def __init__(self, channel: Channel, clock, session):
        self.channel = channel
        self.clock = clock
        self.session = session
        self.report = ChannelReport(channel.name)
        self.state = ChannelState(redis_connection(), channel, clock=clock)

    def now(self) -> datetime:
        return _dt(self.clock())

    def run(self) -> ChannelReport:
        paused = self.state.paused()
        if paused:
            self.report.paused = f"{paused[1]} ({paused[0] - self.clock():.0f}s more)"
            self.report.waiting = AlertDelivery.objects.filter(
                channel=self.channel.name, status=AlertStatus.PENDING
            ).count()
            return self.report
        if self.send_due() == _CONTINUE:
            self.build_and_send_new()
        return self.report

    def send_due(self) -> str:
        due = ChannelMessage.objects.filter(
            channel=self.channel.name, status=AlertStatus.PENDING, next_attempt_at__lte=self.now()
        ).order_by("next_attempt_at", "id")[: self.channel.rate_per_minute]
        for message in list(due):
            if self.send(message) == _STOP:
                return _STOP
        return _CONTINUE

    def build_and_send_new(self) -> None:
        new = AlertDelivery.objects.filter(
            channel=self.channel.name, status=AlertStatus.PENDING, message__isnull=True
        )
        count = new.count()
        if not count:
            return
        remaining = self.state.remaining()
        reserve = min(5, self.channel.rate_per_minute // 4)
        if count <= remaining - reserve:
            built = [
                m for m in (self.build_single(d) for d in new.select_related("alert").order_by("id")) if m
            ]
        else:
            since = self.state.seconds_since_last_send()
            if remaining <= 0 or (since is not None and since < 60.0 / self.channel.rate_per_minute):
                self.report.waiting += count
                return
            max_id = new.aggregate(m=Max("id"))["m"]
            built = [m for m in [self.build_digest(max_id)] if m]
        for message in built:
            if self.send(message) == _STOP:
                return

    def build_single(self, delivery: AlertDelivery) -> ChannelMessage | None:
        card = render.alert_card(delivery.alert)
        with transaction.atomic():
            message = ChannelMessage.objects.create(
                channel=self.channel.name, title=card["title"][:200], body=card, next_attempt_at=self.now()
            )
            if not AlertDelivery.objects.filter(
                pk=delivery.pk, status=AlertStatus.PENDING, message__isnull=True
            ).update(message=message):
                message.delete()  # another sender took it first
                return None
        return message

    def build_digest(self, max_id: int) -> ChannelMessage | None:
        with transaction.atomic():
            message = ChannelMessage.objects.create(
                channel=self.channel.name, title="digest", is_digest=True, next_attempt_at=self.now()
            )
            total = AlertDelivery.objects.filter(
                channel=self.channel.name, status=AlertStatus.PENDING, message__isnull=True, pk__lte=max_id
            ).update(message=message)
            if not total:
                message.delete()
                return None
            card = render.digest_card(
                digest_groups(message), total=total, max_groups=settings.DINGTALK_DIGEST_MAX_GROUPS
            )
            message.title, message.body = card["title"][:200], card
            message.save(update_fields=["title", "body"])
        return message

    def send(self, message: ChannelMessage) -> str:
        slot = self.state.acquire()
        if slot is None:
            self.report.waiting += 1
            return _STOP
        now = self.now()
        lease = now + timedelta(seconds=self.channel.timeout * 2 + 15)
        if not ChannelMessage.objects.filter(
            pk=message.pk, status=AlertStatus.PENDING, attempts=message.attempts, next_attempt_at__lte=now
        ).update(next_attempt_at=lease):
            self.state.release(slot)
            return _CONTINUE
        if self.channel.type == "email":
            result = email.send_mail(self.channel, message.body, msg_uuid=str(message.msg_uuid))
        else:
            result = http.post(
                self.channel,
                message.body,
                msg_uuid=str(message.msg_uuid),
                clock=self.clock,
                session=self.session,
            )
        return self.record(message, result)

    def record(self, message: ChannelMessage, result: ChannelResult) -> str:
        now, attempts = self.now(), message.attempts + 1
        mine = ChannelMessage.objects.filter(
            pk=message.pk, status=AlertStatus.PENDING, attempts=message.attempts
        )
        if result.ok:
            with transaction.atomic():
                if mine.update(status=AlertStatus.SENT, attempts=attempts, sent_at=now, last_errcode=0):
                    carried = AlertDelivery.objects.filter(
                        message_id=message.pk, status=AlertStatus.PENDING
                    ).update(status=AlertStatus.SENT)
                    self.report.sent_messages += 1
                    self.report.sent_alerts += carried
                    self.report.digests += int(message.is_digest)
            return _CONTINUE
        error = result.error[:1000]
        self.report.last_error = error
        if result.outcome == THROTTLED:
            until = self.state.pause(
                result.retry_after or http.DEFAULT_THROTTLE_SECONDS, f"too fast: {error}"
            )
            mine.update(next_attempt_at=_dt(until), last_errcode=result.code, last_error=error)
            self.report.paused = f"throttled by {self.channel.type} until {_dt(until):%H:%M:%S} UTC"
            logger.warning("alert channel %s throttled: %s", self.channel.name, error)
            return _STOP
        if result.outcome in (CONFIG, REJECTED) or attempts >= self.channel.max_attempts:
            self._fail(mine, message, attempts, result, error)
            if result.outcome == CONFIG:
                self.state.pause(
                    settings.DINGTALK_CONFIG_ERROR_PAUSE_SECONDS, f"configuration rejected: {error}"
                )
                self.report.paused = f"configuration rejected: {error}"
                logger.error("alert channel %s rejected its configuration: %s", self.channel.name, error)
                return _STOP
        else:
            delay = send_retry_delay(attempts)
            mine.update(
                attempts=attempts,
                next_attempt_at=now + timedelta(seconds=delay),
                last_errcode=result.code,
                last_error=error,
            )
            self.report.retries_scheduled += 1
            logger.warning("alert channel %s: %s; retry in %ss", self.channel.name, error, delay)
        if result.transport_error:
            self.state.pause(send_retry_delay(1), f"unreachable: {error}")
            self.report.paused = f"unreachable: {error}"
            return _STOP
        return _CONTINUE

    def _fail(self, mine, message, attempts: int, result: ChannelResult, error: str) -> None:
        with transaction.atomic():
            if mine.update(
                status=AlertStatus.FAILED,
                attempts=attempts,
                next_attempt_at=self.now(),
                last_errcode=result.code,
                last_error=error,
            ):
                AlertDelivery.objects.filter(message_id=message.pk, status=AlertStatus.PENDING).update(
                    status=AlertStatus.FAILED
                )
                self.report.failed_messages += 1
        logger.error("alert channel %s message %s failed: %s", self.channel.name, message.msg_uuid, error)


def digest_groups(message: ChannelMessage) -> list[dict]:
    rows = (
        Alert.objects.filter(deliveries__message=message)
        .values("fingerprint", "category")
        .annotate(count=Count("id"), first=Min("created_at"), last=Max("created_at"), sample=Min("id"))
    )
    rows = list(rows)
    samples = Alert.objects.in_bulk([row["sample"] for row in rows])
    return [render.group_for(samples[row["sample"]], row["count"], row["first"], row["last"]) for row in rows]


def send_channel_alerts(*, clock=None, session=None, channels=None) -> list[ChannelReport]:
    """One pass over every configured channel. A channel whose pass breaks is logged and skipped:
    the others still send."""
    clock = clock or time.time
    reports = []
    for channel in configured_channels() if channels is None else channels:
        try:
            reports.append(_ChannelSender(channel, clock, session).run())
        except Exception:  # one channel's fault must not silence the others
            logger.exception("alert channel %s: send pass failed", channel.name)
            reports.append(ChannelReport(channel.name, last_error="send pass failed (see the log)"))
    return reports


def retry_failed_channel_messages(*, clock=None) -> int:
    """Failed channel messages back to pending with a fresh attempt budget (same uuid), and the
    channels' pauses lifted: the operator says the cause is fixed."""
    now = _dt((clock or time.time)())
    with transaction.atomic():
        ids = list(ChannelMessage.objects.filter(status=AlertStatus.FAILED).values_list("id", flat=True))
        ChannelMessage.objects.filter(pk__in=ids, status=AlertStatus.FAILED).update(
            status=AlertStatus.PENDING, attempts=0, next_attempt_at=now
        )
        count = AlertDelivery.objects.filter(message_id__in=ids, status=AlertStatus.FAILED).update(
            status=AlertStatus.PENDING
        )
    for channel in configured_channels():
        ChannelState(redis_connection(), channel).clear_pause()
    return count
