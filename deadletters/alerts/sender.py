"""Delivering the alert outbox, outside any transaction (rows are written by deadletters.alerts.outbox).

Alert          one outbox item (a dead letter, a batch summary): pending -> sent | failed | skipped
AlertMessage   one HTTP message to the robot (a single alert or a digest of many), with a msg_uuid
               that every resend reuses, so DingTalk can drop the duplicate a crash may cause.

A send pass (RQ job kicked on commit, `manage.py send_alerts`, or its --loop):
1. resend messages that are due (retries, and messages whose sender died mid-send);
2. turn unassigned pending alerts into messages: one message each while the minute's budget
   allows, otherwise one digest grouped by fingerprint that counts every alert it carries;
3. for each message: take a rate slot (Redis, shared), claim the message with a conditional
   UPDATE that sets a lease, POST it outside any transaction, then mark it sent.
A crash between the POST and the mark leaves the message pending: when its lease ends it is sent
again with the same msg_uuid. At most one duplicate per crash, never a loss.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Min, Q
from redis.exceptions import RedisError

from deadletters.alerts import client, messages
from deadletters.alerts.channels.render import resolved_card
from deadletters.alerts.client import RobotConfig, SendResult
from deadletters.alerts.ratelimit import WINDOW_SECONDS, RobotState
from deadletters.models import Alert, AlertCategory, AlertMessage, AlertStatus
from transport.connection import redis_connection

logger = logging.getLogger("deadletters.alerts")

Clock = Callable[[], float]


def _dt(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def send_lease_seconds(robot: RobotConfig) -> float:
    """How long a claimed message is left alone before another sender may resend it."""
    return robot.timeout * 2 + 15


def send_retry_delay(attempts: int) -> float:
    steps = settings.DINGTALK_RETRY_BACKOFF
    return steps[min(max(attempts, 1) - 1, len(steps) - 1)]


# --- the send pass ----------------------------------------------------------------


@dataclass
class PassReport:
    sent_messages: int = 0
    sent_alerts: int = 0
    digests: int = 0
    retries_scheduled: int = 0
    failed_messages: int = 0
    skipped_alerts: int = 0
    waiting_alerts: int = 0
    paused: str = ""
    last_error: str = ""

    @property
    def did_something(self) -> bool:
        return bool(
            self.sent_messages or self.retries_scheduled or self.failed_messages or self.skipped_alerts
        )

    def summary(self) -> str:
        parts = [
            f"sent {self.sent_messages} message(s) carrying {self.sent_alerts} alert(s)"
            + (f" ({self.digests} digest(s))" if self.digests else "")
        ]
        if self.retries_scheduled:
            parts.append(f"{self.retries_scheduled} send(s) failed and will be retried")
        if self.failed_messages:
            parts.append(f"{self.failed_messages} message(s) failed for good")
        if self.skipped_alerts:
            parts.append(f"{self.skipped_alerts} alert(s) skipped: no DINGTALK_WEBHOOK")
        if self.waiting_alerts:
            parts.append(f"{self.waiting_alerts} alert(s) waiting for the rate budget")
        if self.paused:
            parts.append(f"paused: {self.paused}")
        if self.last_error:
            parts.append(f"last error: {self.last_error}")
        return "; ".join(parts)


_STOP, _CONTINUE = "stop", "continue"


class _Sender:
    def __init__(self, robot: RobotConfig, clock: Clock, session, report: PassReport):
        self.robot = robot
        self.clock = clock
        self.session = session
        self.report = report
        self.state = RobotState(redis_connection(), robot, clock=clock)

    def now(self) -> datetime:
        return _dt(self.clock())

    # 1. messages already built and due
    def send_due_messages(self) -> str:
        due = list(
            AlertMessage.objects.filter(status=AlertStatus.PENDING, next_attempt_at__lte=self.now())
            .order_by("next_attempt_at", "id")
            .only("id", "msg_uuid", "attempts", "body", "is_digest")[: self.robot.rate_per_minute]
        )
        for message in due:
            if self.send(message) == _STOP:
                return _STOP
        return _CONTINUE

    # 2. new alerts -> messages
    def build_and_send_new(self) -> None:
        new = Alert.objects.filter(status=AlertStatus.PENDING, message__isnull=True)
        count = new.count()
        if not count:
            return
        if self.state.down_until():
            self.report.waiting_alerts += count  # coalesced once the robot answers again
            return
        remaining = self.state.remaining()
        if remaining <= 0:
            self.report.waiting_alerts += count
            return
        # Keep a few slots for the digests that follow a burst, so a storm stays readable.
        reserve = min(5, self.robot.rate_per_minute // 4)
        if count <= remaining - reserve:
            built = self.build_singles(list(new.order_by("id")[:count]))
        else:
            # A storm: pace the digests over the minute (one per 60/rate seconds) instead of
            # spending the whole budget in the first seconds; each digest then carries more.
            since = self.state.seconds_since_last_send()
            if since is not None and since < WINDOW_SECONDS / self.robot.rate_per_minute:
                self.report.waiting_alerts += count
                return
            max_id = new.aggregate(m=Max("id"))["m"]
            digest = self.build_digest(max_id) if max_id is not None else None
            built = [digest] if digest else []
        for message in built:
            if self.send(message) == _STOP:
                return

    def build_singles(self, alerts: list[Alert]) -> list[AlertMessage]:
        built = []
        for alert in alerts:
            if alert.category == AlertCategory.BATCH_SUMMARY:
                title, body = messages.render_batch_summary(alert.payload, self.robot)
            elif alert.category == AlertCategory.RESOLVED:
                title, body = messages.render_card(resolved_card(alert.payload), self.robot)
            else:
                title, body = messages.render_dead_letter(alert.payload, self.robot)
            with transaction.atomic():
                message = AlertMessage.objects.create(title=title, body=body, next_attempt_at=self.now())
                taken = Alert.objects.filter(
                    pk=alert.pk, status=AlertStatus.PENDING, message__isnull=True
                ).update(message=message)
                if not taken:  # another sender took it first
                    message.delete()
                    continue
            built.append(message)
        return built

    def build_digest(self, max_id: int) -> AlertMessage | None:
        with transaction.atomic():
            message = AlertMessage.objects.create(
                title="digest", body={}, is_digest=True, next_attempt_at=self.now()
            )
            total = Alert.objects.filter(
                status=AlertStatus.PENDING, message__isnull=True, pk__lte=max_id
            ).update(message=message)
            if not total:
                message.delete()
                return None
            groups = digest_groups(message)
            title, body = messages.render_digest(
                groups, total=total, robot=self.robot, max_groups=settings.DINGTALK_DIGEST_MAX_GROUPS
            )
            message.title = title[:200]
            message.body = body
            message.save(update_fields=["title", "body"])
        logger.info("coalesced %s alerts into digest %s (%s groups)", total, message.msg_uuid, len(groups))
        return message

    # 3. one message: slot, claim, POST, mark
    def send(self, message: AlertMessage) -> str:
        slot = self.state.acquire()
        if slot is None:
            self.report.paused = self.report.paused or (
                f"rate budget of {self.robot.rate_per_minute}/min spent; "
                f"next slot in {self.state.seconds_until_slot():.0f}s"
            )
            return _STOP
        now = self.now()
        claimed = AlertMessage.objects.filter(
            pk=message.pk, status=AlertStatus.PENDING, attempts=message.attempts, next_attempt_at__lte=now
        ).update(next_attempt_at=now + timedelta(seconds=send_lease_seconds(self.robot)))
        if not claimed:  # another sender has it, or it was marked meanwhile
            self.state.release(slot)
            return _CONTINUE
        body = messages.with_keyword(message.body, self.robot.keyword)
        result = client.send(
            self.robot, body, msg_uuid=message.msg_uuid, clock=self.clock, session=self.session
        )
        return self.record(message, result)

    def record(self, message: AlertMessage, result: SendResult) -> str:
        now = self.now()
        attempts = message.attempts + 1
        mine = AlertMessage.objects.filter(
            pk=message.pk, status=AlertStatus.PENDING, attempts=message.attempts
        )
        if result.ok:
            with transaction.atomic():
                if mine.update(status=AlertStatus.SENT, attempts=attempts, sent_at=now, last_errcode=0):
                    carried = Alert.objects.filter(message_id=message.pk, status=AlertStatus.PENDING).update(
                        status=AlertStatus.SENT
                    )
                    self.report.sent_messages += 1
                    self.report.sent_alerts += carried
                    self.report.digests += int(message.is_digest)
            self.state.clear_down()
            logger.info("alert message %s sent (attempt %s)", message.msg_uuid, attempts)
            return _CONTINUE
        error = result.error[:1000]
        self.report.last_error = error
        if result.throttled:
            until = self.state.throttle(settings.DINGTALK_THROTTLE_BACKOFF_SECONDS)
            # Not the message's fault: no attempt is counted, it goes out when the robot is unmuted.
            mine.update(next_attempt_at=_dt(until), last_errcode=result.errcode, last_error=error)
            self.report.paused = (
                f"robot throttled by DingTalk (errcode 130101) until {_dt(until):%H:%M:%S} UTC"
            )
            logger.warning("DingTalk throttled robot %s: %s; backing off", self.robot.robot_key, error)
            return _STOP
        if result.config_error:
            self._fail(mine, message, attempts, result, error)
            self.state.set_config_error(
                errcode=result.errcode, error=error, seconds=settings.DINGTALK_CONFIG_ERROR_PAUSE_SECONDS
            )
            self.report.paused = f"DingTalk rejected the configuration: {error}"
            logger.error(
                "DingTalk rejected robot %s configuration (%s): check DINGTALK_SECRET, DINGTALK_KEYWORD "
                "and the server clock; sending paused",
                self.robot.robot_key,
                error,
            )
            return _STOP
        if attempts >= settings.DINGTALK_MAX_SEND_ATTEMPTS:
            self._fail(mine, message, attempts, result, error)
        else:
            delay = send_retry_delay(attempts)
            mine.update(
                attempts=attempts,
                next_attempt_at=now + timedelta(seconds=delay),
                last_errcode=result.errcode,
                last_error=error,
            )
            self.report.retries_scheduled += 1
            logger.warning(
                "alert message %s attempt %s failed (%s); retry in %ss",
                message.msg_uuid,
                attempts,
                error,
                delay,
            )
        if result.transport_error:
            self.state.mark_down(send_retry_delay(1))
            return _STOP
        return _CONTINUE

    def _fail(self, mine, message, attempts, result: SendResult, error: str) -> None:
        with transaction.atomic():
            if mine.update(
                status=AlertStatus.FAILED,
                attempts=attempts,
                next_attempt_at=self.now(),  # for a failed message: when it failed
                last_errcode=result.errcode,
                last_error=error,
            ):
                Alert.objects.filter(message_id=message.pk, status=AlertStatus.PENDING).update(
                    status=AlertStatus.FAILED
                )
                self.report.failed_messages += 1
        logger.error("alert message %s failed after %s attempt(s): %s", message.msg_uuid, attempts, error)


def digest_groups(message: AlertMessage) -> list[dict]:
    """Alerts carried by `message`, grouped by fingerprint, with counts and first/last seen."""
    groups = {
        row["fingerprint"]: {**row, "kinds": []}
        for row in Alert.objects.filter(message=message)
        .values("fingerprint")
        .annotate(count=Count("id"), first=Min("created_at"), last=Max("created_at"), sample=Min("id"))
    }
    kinds = (
        Alert.objects.filter(message=message, category=AlertCategory.DEAD_LETTER)
        .values_list("fingerprint", "dead_letter__kind")
        .distinct()
    )
    for fp, kind in kinds:
        if fp in groups and kind and kind not in groups[fp]["kinds"]:
            groups[fp]["kinds"].append(kind)
    samples = Alert.objects.in_bulk([g["sample"] for g in groups.values()])
    for group in groups.values():
        sample = samples.get(group["sample"])
        payload = sample.payload if sample else {}
        group["error_type"] = payload.get("error_type", "")
        group["message"] = payload.get("message", "")
        group["new"] = bool(payload.get("new"))
        if sample is not None and sample.category == AlertCategory.BATCH_SUMMARY:
            group["batch_id"] = payload.get("batch_id", "")
            group["name"] = payload.get("name", "")
            group.update({key: payload.get(key, "-") for key in ("total", "done", "dead")})
        group["kinds"] = sorted(group["kinds"]) or [payload.get("kind", "")]
    return list(groups.values())


def send_pending_alerts(
    *, clock: Clock | None = None, robot: RobotConfig | None = None, session=None
) -> PassReport:
    """One send pass. Safe to run from several processes at once. Never raises for DingTalk errors."""
    clock = clock or time.time
    robot = robot or RobotConfig.from_settings()
    report = PassReport()
    if not robot.configured:
        report.skipped_alerts = skip_pending_alerts()
        return report
    sender = _Sender(robot, clock, session, report)
    paused = sender.state.paused_reason()
    if paused:
        report.paused = paused
        report.waiting_alerts = Alert.objects.filter(status=AlertStatus.PENDING).count()
        return report
    if sender.send_due_messages() == _CONTINUE:
        sender.build_and_send_new()
    return report


def skip_pending_alerts() -> int:
    """No robot configured: pending alerts become `skipped` (visible in the console), nothing is sent."""
    with transaction.atomic():
        AlertMessage.objects.filter(status=AlertStatus.PENDING).update(
            status=AlertStatus.SKIPPED, last_error="no DINGTALK_WEBHOOK configured"
        )
        return Alert.objects.filter(status=AlertStatus.PENDING).update(status=AlertStatus.SKIPPED)


def retry_failed_alerts(*, clock: Clock | None = None, robot: RobotConfig | None = None) -> int:
    """Put failed messages (and their alerts) back to pending with a fresh attempt budget. They keep
    their msg_uuid. Also lifts a configuration-error pause: the operator says it is fixed."""
    clock = clock or time.time
    robot = robot or RobotConfig.from_settings()
    with transaction.atomic():
        failed = AlertMessage.objects.filter(status=AlertStatus.FAILED)
        ids = list(failed.values_list("id", flat=True))
        AlertMessage.objects.filter(pk__in=ids, status=AlertStatus.FAILED).update(
            status=AlertStatus.PENDING, attempts=0, next_attempt_at=_dt(clock())
        )
        count = Alert.objects.filter(
            Q(message_id__in=ids) | Q(message__isnull=True), status=AlertStatus.FAILED
        ).update(status=AlertStatus.PENDING)
    if robot.configured:
        try:
            RobotState(redis_connection(), robot, clock=clock).clear_config_error()
        except RedisError as exc:
            logger.warning("could not clear the config-error pause in Redis: %s", exc)
    return count
