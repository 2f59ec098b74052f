"""The one sender: delivers the outbox to every channel, each on its own budget and pause state,
outside any transaction. `send_due_alerts()` is one pass (the RQ job kicked on commit, `manage.py
send_alerts`, the housekeeper's duty); several may run at once.

For each channel that is not paused:
1. send its due messages, oldest first (resends, and messages whose sender died mid-send);
2. turn its new rows into messages: one card per cause while the budget allows (a cause already
   announced within FOLD_SECONDS waits, then goes out as one follow-up "+N more ..."), or one
   digest of everything when there are more than the budget;
3. for each message: take a budget slot (Redis, shared), claim the message with a conditional
   UPDATE that sets a lease, send it, then mark it and the rows it carries.
A crash between the send and the mark leaves the message pending: when its lease ends it goes again
with the same msg_uuid (DingTalk's msgUuid, the webhook's Idempotency-Key). At most one duplicate
per crash, never a loss. A channel that does not answer is paused as `down` and probed with its
oldest message within PROBE_MAX_SECONDS; the first answer ends the pause and the rest drain at once,
in the order the deaths happened. Only answers that refuse a message use up its attempts.
"""

import logging
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Min

from config.backoff import backoff_delay
from deadletters.alerts import render, wire
from deadletters.alerts.channels import Channel, configured_channels
from deadletters.alerts.resolved import announce_resolved_causes
from deadletters.alerts.snooze import announce_ended_snoozes
from deadletters.alerts.state import CONFIG, DOWN, THROTTLED, WINDOW_SECONDS, ChannelState
from deadletters.models import Alert, AlertCategory, AlertMessage, AlertStatus
from transport.connection import redis_connection

logger = logging.getLogger("deadletters.alerts")
FOLD_SECONDS = 300  # further deaths of a cause announced this recently fold into one follow-up
PROBE_MAX_SECONDS = 30  # a channel that does not answer is tried again at least this often
_STOP, _CONTINUE = "stop", "continue"


def _dt(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


@dataclass
class Report:
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
        extra = [
            (self.digests, "digest(s)"),
            (self.retries_scheduled, "to retry"),
            (self.failed_messages, "failed"),
        ]
        extra += [(self.waiting, "waiting"), (self.paused, "paused:"), (self.last_error, "last error:")]
        return text + "".join(
            f", {n} {what}" if isinstance(n, int) else f", {what} {n}" for n, what in extra if n
        )


class _ChannelSender:
    def __init__(self, channel: Channel, clock, session):
        self.channel = channel
        self.clock = clock
        self.session = session
        self.report = Report(channel.name)
        self.state = ChannelState(redis_connection(), channel, clock=clock)

    def now(self) -> datetime:
        return _dt(self.clock())

    def pending(self):
        return Alert.objects.filter(
            channel=self.channel.name, status=AlertStatus.PENDING, message__isnull=True
        )

    def run(self) -> Report:
        paused = self.state.paused()
        if paused:
            self.report.paused = f"{paused['reason']} ({float(paused['until']) - self.clock():.0f}s more)"
            self.report.waiting = self.pending().count()
            return self.report
        if self.send_due() == _CONTINUE:
            self.build_and_send_new()
        return self.report

    # 1. messages already built and due, oldest first
    def send_due(self) -> str:
        due = AlertMessage.objects.filter(
            channel=self.channel.name, status=AlertStatus.PENDING, next_attempt_at__lte=self.now()
        ).order_by("id")[: self.channel.rate_per_minute]
        for message in list(due):
            if self.send(message) == _STOP:
                return _STOP
        return _CONTINUE

    # 2. new rows -> messages
    def build_and_send_new(self) -> None:
        rows = list(
            self.pending().order_by("id").values_list("id", "category", "fingerprint", "payload__lifecycle")
        )
        if not rows:
            return
        causes: dict[str, list[int]] = {}
        plan: list[tuple[str, list[int]]] = []
        for pk, category, fingerprint, lifecycle in rows:
            # A regression or a crossed threshold is a card of its own, never folded nor held.
            if category == AlertCategory.DEAD_LETTER and fingerprint and not lifecycle:
                causes.setdefault(fingerprint, []).append(pk)
            else:
                plan.append(("", [pk]))
        last = self.announced(causes) if len(causes) <= self.channel.rate_per_minute else {}
        now = self.now()
        held = {fp for fp, at in last.items() if (now - at).total_seconds() < FOLD_SECONDS}
        plan += [(fp, ids) for fp, ids in causes.items() if fp not in held]
        remaining = self.state.remaining()
        reserve = min(5, self.channel.rate_per_minute // 4)
        if len(plan) <= remaining - reserve:
            # A cause announced shortly before is followed up; one quiet for longer is announced anew.
            recent = {fp: at for fp, at in last.items() if (now - at).total_seconds() < 2 * FOLD_SECONDS}
            plan.sort(key=lambda step: step[1][0])
            built = [m for m in (self.build(fp, ids, recent.get(fp)) for fp, ids in plan) if m]
        else:
            # A storm: pace the digests over the minute (one per 60/rate seconds) instead of
            # spending the whole budget in the first seconds; each digest then carries more.
            since = self.state.seconds_since_last_send()
            if remaining <= 0 or (
                since is not None and since < WINDOW_SECONDS / self.channel.rate_per_minute
            ):
                self.report.waiting += len(rows)
                return
            built = [m for m in [self.build_digest(rows[-1][0])] if m]
        self.report.waiting += len(rows) - sum(m.carried for m in built)
        for message in built:
            if self.send(message) == _STOP:
                return

    def announced(self, causes: dict) -> dict[str, datetime]:
        """When each cause was last in a message on this channel."""
        rows = (
            Alert.objects.filter(
                channel=self.channel.name, fingerprint__in=list(causes), message__isnull=False
            )
            .values("fingerprint")
            .annotate(last=Max("message__created_at"))
        )
        return {row["fingerprint"]: row["last"] for row in rows}

    def _message(self, **fields) -> AlertMessage:
        now = self.now()
        return AlertMessage.objects.create(
            channel=self.channel.name, next_attempt_at=now, created_at=now, **fields
        )

    def build(self, fingerprint: str, ids: list[int], announced_at: datetime | None) -> AlertMessage | None:
        """One card: a single row, or every waiting death of one cause (a follow-up when the
        cause was announced before)."""
        with transaction.atomic():
            message = self._message(title="-")
            taken = Alert.objects.filter(pk__in=ids, status=AlertStatus.PENDING, message__isnull=True).update(
                message=message
            )
            if not taken:  # another sender took them first
                message.delete()
                return None
            alerts = Alert.objects.filter(message=message).order_by("id")
            if announced_at is not None:
                minutes = max(math.ceil((self.now() - announced_at).total_seconds() / 60), 1)
                card = render.alert_card(alerts.last(), more=taken, minutes=minutes, follow_up=True)
            else:
                first = alerts.first()
                minutes = max(math.ceil((self.now() - first.created_at).total_seconds() / 60), 1)
                card = render.alert_card(first, more=taken - 1, minutes=minutes)
            message.title, message.body = card["title"][:200], card
            message.save(update_fields=["title", "body"])
        message.carried = taken
        return message

    def build_digest(self, max_id: int) -> AlertMessage | None:
        with transaction.atomic():
            message = self._message(title="digest", is_digest=True)
            total = self.pending().filter(pk__lte=max_id).update(message=message)
            if not total:
                message.delete()
                return None
            card = render.digest_card(digest_groups(message), max_groups=settings.DINGTALK_DIGEST_MAX_GROUPS)
            message.title, message.body = card["title"][:200], card
            message.save(update_fields=["title", "body"])
        logger.info(
            "alert channel %s: %s alerts coalesced into digest %s", self.channel.name, total, message.msg_uuid
        )
        message.carried = total
        return message

    # 3. one message: slot, claim, send, mark
    def send(self, message: AlertMessage) -> str:
        slot = self.state.acquire()
        if slot is None:
            self.report.paused = self.report.paused or (
                f"budget of {self.channel.rate_per_minute}/min spent; "
                f"next slot in {self.state.seconds_until_slot():.0f}s"
            )
            return _STOP
        now = self.now()
        lease = now + timedelta(seconds=self.channel.timeout * 2 + 15)
        if not AlertMessage.objects.filter(
            pk=message.pk, status=AlertStatus.PENDING, attempts=message.attempts, next_attempt_at__lte=now
        ).update(next_attempt_at=lease):
            self.state.release(slot)  # another sender has it, or it was marked meanwhile
            return _CONTINUE
        result = wire.send(
            self.channel, message.body, msg_uuid=str(message.msg_uuid), clock=self.clock, session=self.session
        )
        return self.record(message, result)

    def record(self, message: AlertMessage, result: wire.Result) -> str:
        now, attempts = self.now(), message.attempts + 1
        mine = AlertMessage.objects.filter(
            pk=message.pk, status=AlertStatus.PENDING, attempts=message.attempts
        )
        if result.ok:
            with transaction.atomic():
                if mine.update(status=AlertStatus.SENT, attempts=attempts, sent_at=now, last_errcode=0):
                    carried = message.alerts.filter(status=AlertStatus.PENDING).update(
                        status=AlertStatus.SENT
                    )
                    self.report.sent_messages += 1
                    self.report.sent_alerts += carried
                    self.report.digests += int(message.is_digest)
            if self.state.recorded():
                self.state.clear_pause()  # it answers: a down channel is up again
            return _CONTINUE
        error = result.error[:1000]
        self.report.last_error = error
        name = self.channel.name
        if result.outcome == wire.THROTTLED:
            # Not the message's fault: no attempt is counted, it goes out when the pause ends.
            until = self.state.pause(THROTTLED, result.retry_after, f"throttled by the service: {error}")
            mine.update(next_attempt_at=_dt(until), last_errcode=result.code, last_error=error)
            self.report.paused = f"throttled until {_dt(until):%H:%M:%S} UTC: {error}"
            logger.warning("alert channel %s throttled: %s; backing off", name, error)
            return _STOP
        if result.transport_error:
            # The channel's fault, not the message's: it stays first in line, the channel is probed.
            previous = self.state.recorded() or {}
            failures = int(previous.get("failures", 0)) + 1 if previous.get("kind") == DOWN else 1
            delay = min(backoff_delay(failures, settings.DINGTALK_RETRY_BACKOFF), PROBE_MAX_SECONDS)
            until = self.state.pause(DOWN, delay, f"no answer: {error}", failures=failures)
            mine.update(
                attempts=attempts, next_attempt_at=_dt(until), last_errcode=result.code, last_error=error
            )
            self.report.retries_scheduled += 1
            self.report.paused = f"unreachable: {error}"
            logger.warning("alert channel %s unreachable (%s); probing again in %.0fs", name, error, delay)
            return _STOP
        if result.outcome in (wire.CONFIG, wire.REJECTED) or attempts >= self.channel.max_attempts:
            self._fail(mine, message, attempts, result, error)
            if result.outcome == wire.CONFIG:
                self.state.pause(
                    CONFIG, settings.DINGTALK_CONFIG_ERROR_PAUSE_SECONDS, f"configuration rejected: {error}"
                )
                self.report.paused = f"configuration rejected: {error}"
                logger.error("alert channel %s rejected its configuration (%s); sending paused", name, error)
                return _STOP
            return _CONTINUE
        delay = backoff_delay(attempts, settings.DINGTALK_RETRY_BACKOFF)
        mine.update(
            attempts=attempts,
            next_attempt_at=now + timedelta(seconds=delay),
            last_errcode=result.code,
            last_error=error,
        )
        self.report.retries_scheduled += 1
        logger.warning("alert channel %s message %s: %s; retry in %ss", name, message.msg_uuid, error, delay)
        return _CONTINUE

    def _fail(self, mine, message, attempts: int, result: wire.Result, error: str) -> None:
        with transaction.atomic():
            if mine.update(
                status=AlertStatus.FAILED,
                attempts=attempts,
                next_attempt_at=self.now(),  # for a failed message: when it failed
                last_errcode=result.code,
                last_error=error,
            ):
                message.alerts.filter(status=AlertStatus.PENDING).update(status=AlertStatus.FAILED)
                self.report.failed_messages += 1
        logger.error("alert channel %s message %s failed: %s", self.channel.name, message.msg_uuid, error)


def digest_groups(message: AlertMessage) -> list[dict]:
    """The rows a digest carries, grouped by cause (fingerprint), with counts, first and last
    seen, the kinds and one sample row for the words."""
    carried = Alert.objects.filter(message=message)
    rows = list(
        carried.values("fingerprint").annotate(
            count=Count("id"), first=Min("created_at"), last=Max("created_at"), sample=Min("id")
        )
    )
    kinds: dict[str, set] = {}
    for fp, kind in (
        carried.filter(category=AlertCategory.DEAD_LETTER)
        .values_list("fingerprint", "dead_letter__kind")
        .distinct()
    ):
        kinds.setdefault(fp, set()).add(kind or "")
    samples = Alert.objects.in_bulk([row["sample"] for row in rows])
    return [
        {**row, "sample": samples[row["sample"]], "kinds": sorted(kinds.get(row["fingerprint"], ()))}
        for row in rows
    ]


def skip_unconfigured() -> int:
    """Rows and messages of a channel no longer configured become `skipped` (visible, not sent)."""
    names = [c.name for c in configured_channels()]
    with transaction.atomic():
        AlertMessage.objects.filter(status=AlertStatus.PENDING).exclude(channel__in=names).update(
            status=AlertStatus.SKIPPED, last_error="channel not configured"
        )
        return (
            Alert.objects.filter(status=AlertStatus.PENDING)
            .exclude(channel__in=names)
            .update(status=AlertStatus.SKIPPED)
        )


def send_due_alerts(*, clock=None, session=None, channels=None) -> list[Report]:
    """One pass: the notices that are due (quiet causes, ended snoozes), then every channel. A
    channel whose pass breaks is logged and skipped: the others still send. The housekeeper's
    periodic duty and the RQ job both call this."""
    clock = clock or time.time
    announce_resolved_causes(clock=clock)
    announce_ended_snoozes(clock=clock)
    skip_unconfigured()
    reports = []
    for channel in configured_channels() if channels is None else channels:
        try:
            reports.append(_ChannelSender(channel, clock, session).run())
        except Exception:  # one channel's fault must not silence the others
            logger.exception("alert channel %s: send pass failed", channel.name)
            reports.append(Report(channel.name, last_error="send pass failed (see the log)"))
    return reports


def retry_failed_alerts(*, clock=None) -> int:
    """Failed messages back to pending with a fresh attempt budget (same msg_uuid), their rows too,
    and the channels' configuration pauses lifted: the operator says the cause is fixed."""
    now = _dt((clock or time.time)())
    with transaction.atomic():
        ids = list(AlertMessage.objects.filter(status=AlertStatus.FAILED).values_list("id", flat=True))
        AlertMessage.objects.filter(pk__in=ids, status=AlertStatus.FAILED).update(
            status=AlertStatus.PENDING, attempts=0, next_attempt_at=now
        )
        count = Alert.objects.filter(message_id__in=ids, status=AlertStatus.FAILED).update(
            status=AlertStatus.PENDING
        )
    for channel in configured_channels():
        state = ChannelState(redis_connection(), channel)
        if (state.recorded() or {}).get("kind") == CONFIG:
            state.clear_pause()
    return count
