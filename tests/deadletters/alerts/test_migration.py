"""The move to one alert stack (deadletters migrations 0011 and 0012): a database holding queued,
sent and failed rows of both old stacks (DingTalk's Alert/AlertMessage, the channels'
AlertDelivery/ChannelMessage) loses nothing and sends nothing twice: after the migration one send
pass delivers exactly what was waiting, resends keep their uuid, and what was sent stays sent."""

import uuid

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from deadletters.alerts.sender import send_due_alerts
from deadletters.models import Alert, AlertMessage, AlertStatus
from reports.models import ReportTask

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("deadletters", "0010_bulk_canary_schedule")]


def old_database():
    """Rows as the previous version wrote them; returns the uuids of what is still to send."""
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    task = ReportTask.objects.create(kind="probe", params={}, max_attempts=3, timeout_seconds=300, attempt=3)
    letter = old.get_model("deadletters", "DeadLetter").objects.create(
        task_id=task.pk, kind="probe", error_type="x.Error", attempts=3, fingerprint="a" * 40
    )
    Alert_ = old.get_model("deadletters", "Alert")
    Message = old.get_model("deadletters", "AlertMessage")
    Delivery = old.get_model("deadletters", "AlertDelivery")
    ChannelMessage = old.get_model("deadletters", "ChannelMessage")
    payload = {
        "dead_letter_id": letter.pk,
        "task_id": str(uuid.uuid4()),
        "kind": "probe",
        "error_type": "x.Error",
        "message": "m",
        "attempts": 3,
        "created_at": timezone.now().isoformat(),
    }

    def alert(status, message=None):  # each of its own cause, so that none waits to be folded
        return Alert_.objects.create(
            dead_letter=letter,
            fingerprint=uuid.uuid4().hex + "0" * 8,
            payload=payload,
            status=status,
            message=message,
        )

    def message(model, status, **extra):
        return model.objects.create(
            title="t",
            body={"event": "death", "title": "t", "lines": ["l"], "links": []},
            status=status,
            sent_at=timezone.now() if status == "sent" else None,
            **extra,
        )

    queued = alert("pending")
    retrying = message(Message, "pending", attempts=2)
    alert("pending", retrying)
    alert("sent", message(Message, "sent", attempts=1))
    alert("failed", message(Message, "failed", attempts=10))
    skipped = alert("skipped")  # no robot then; the webhook took it
    alert("muted")
    hook_waiting = message(ChannelMessage, "pending", channel="webhook", attempts=1)
    Delivery.objects.create(alert=queued, channel="webhook", status="pending", message=hook_waiting)
    Delivery.objects.create(alert=skipped, channel="webhook", status="pending")
    Delivery.objects.create(
        alert=queued, channel="slack", status="sent", message=message(ChannelMessage, "sent", channel="slack")
    )
    Delivery.objects.create(
        alert=skipped,
        channel="slack",
        status="failed",
        message=message(ChannelMessage, "failed", channel="slack"),
    )
    return {"dingtalk": str(retrying.msg_uuid), "webhook": str(hook_waiting.msg_uuid)}


def test_migrating_both_stacks_loses_nothing_and_sends_nothing_twice(fake_dingtalk, channels, settings):
    waiting = old_database()
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    rows = sorted(Alert.objects.values_list("channel", "status"))
    assert rows == [
        ("", "muted"),
        ("dingtalk", "failed"),
        ("dingtalk", "pending"),
        ("dingtalk", "pending"),
        ("dingtalk", "sent"),
        ("slack", "failed"),
        ("slack", "sent"),
        ("webhook", "pending"),
        ("webhook", "pending"),
    ]
    assert sorted(AlertMessage.objects.values_list("channel", "status")) == [
        ("dingtalk", "failed"),
        ("dingtalk", "pending"),
        ("dingtalk", "sent"),
        ("slack", "failed"),
        ("slack", "sent"),
        ("webhook", "pending"),
    ]
    assert {str(m.msg_uuid) for m in AlertMessage.objects.filter(status="pending")} == set(waiting.values())

    robot = fake_dingtalk()
    fakes = channels(webhook={}, slack={})
    send_due_alerts()

    # DingTalk: the resend with its old msgUuid, and the queued alert in a message of its own.
    assert len(robot.accepted) == 2 and waiting["dingtalk"] in robot.uuid_counts()
    assert [h.headers["Idempotency-Key"] for h in fakes["webhook"].hits][0] == waiting["webhook"]
    assert len(fakes["webhook"].accepted) == 2 and not fakes["slack"].hits  # sent and failed stay so
    assert set(Alert.objects.values_list("status", flat=True)) == {"sent", "failed", "muted"}
    assert Alert.objects.filter(status=AlertStatus.FAILED).count() == 2
