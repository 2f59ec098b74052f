"""Snoozing: an operator mutes a cause or a kind for a time with a reason (audited); muted deaths
are counted, not sent, on every channel and on DingTalk; one summary goes out when the snooze
ends (time up or lifted), and a paused kind's deaths are not alerted one by one."""

import pytest

from deadletters.alerts.sender import send_due_alerts
from deadletters.alerts.snooze import SnoozeError, announce_ended_snoozes, lift_snooze, snooze_alerts
from deadletters.models import Alert, AlertStatus, AuditEntry
from deadletters.services.kind_pauses import pause_kind, resume_kind
from tests.conftest import make_death
from tests.dingtalk_fake import FakeClock

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_snoozed_cause_is_counted_not_sent_and_summarised_once_when_time_is_up(
    fake_dingtalk, channels, redis_conn
):
    clock = FakeClock()
    robot = fake_dingtalk(clock=clock)
    fakes = channels(webhook={"clock": clock})
    first = make_death(message="db down 'a'")
    send_due_alerts(clock=clock)
    snooze = snooze_alerts(
        fingerprint=first.fingerprint, minutes=30, reason="known outage, DBA on it", actor="alice"
    )
    [entry] = AuditEntry.objects.filter(action="snooze_alerts")
    assert entry.actor == "alice" and entry.reason == "known outage, DBA on it"
    assert entry.details["fingerprint"] == first.fingerprint

    for i in range(5):
        make_death(message=f"db down '{i}'")
    other = make_death(error_type="app.errors.Other", message="another cause")
    muted = Alert.objects.filter(status=AlertStatus.MUTED)
    assert muted.count() == 5 and not muted.exclude(channel="").exists()  # one row each, no channel's
    clock.advance(2)
    send_due_alerts(clock=clock)
    assert len(robot.accepted) == 2 and len(fakes["webhook"].accepted) == 2  # the first and the other cause
    assert {a.status for a in other.alerts.all()} == {AlertStatus.SENT}

    assert announce_ended_snoozes(clock=clock) == 0  # still running
    clock.advance(31 * 60)
    assert announce_ended_snoozes(clock=clock) == 1
    assert announce_ended_snoozes(clock=clock) == 0  # one summary
    send_due_alerts(clock=clock)
    # The same pass may say that the other cause went quiet meanwhile: the summary is one message.
    [summary] = [h.body for h in fakes["webhook"].accepted if h.body["title"].startswith("Snooze ended: ")]
    assert (
        summary["event"] == "resolved" and summary["title"] == "Snooze ended: PermanentError: db down '4'"
    )  # the cause's latest words
    assert "Deaths while muted: 5" in "\n".join(summary["lines"])
    assert "Muted because: known outage, DBA on it" in summary["lines"]
    assert any("Snooze ended" in r.card["title"] for r in robot.accepted)
    snooze.refresh_from_db()
    assert snooze.ended_at is not None
    # After it ended, the cause alerts again.
    make_death(message="db down 'z'")
    assert Alert.objects.order_by("-id").first().status == AlertStatus.PENDING


def test_a_lifted_kind_snooze_summarises_at_once_and_is_audited(channels, redis_conn):
    fakes = channels(webhook={})
    snooze = snooze_alerts(
        kind="probe", minutes=60, reason="noisy during migration", actor="bob", source="api"
    )
    make_death(kind="probe", message="x 'a'")
    make_death(kind="probe", error_type="app.errors.Y", message="y")
    make_death(kind="sales_summary", message="z 'b'")
    assert Alert.objects.filter(status=AlertStatus.MUTED).count() == 2
    assert lift_snooze(snooze_id=snooze.pk, actor="carol") is not None
    assert lift_snooze(snooze_id=snooze.pk, actor="carol") is None  # a second click changes nothing
    assert AuditEntry.objects.filter(action="lift_snooze", actor="carol").count() == 1
    assert announce_ended_snoozes() == 1
    send_due_alerts()
    summary = fakes["webhook"].accepted[-1].body
    assert summary["title"] == "Snooze ended: probe" and "Deaths while muted: 2" in " ".join(summary["lines"])


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"minutes": 30, "reason": "r"}, "fingerprint"),
        ({"fingerprint": "a" * 40, "kind": "probe", "minutes": 30, "reason": "r"}, "fingerprint"),
        ({"fingerprint": "not-hex", "minutes": 30, "reason": "r"}, "fingerprint"),
        ({"kind": "probe", "minutes": 0, "reason": "r"}, "minutes"),
        ({"kind": "probe", "minutes": 7 * 24 * 60 + 1, "reason": "r"}, "minutes"),
        ({"kind": "probe", "minutes": "soon", "reason": "r"}, "minutes"),
        ({"kind": "probe", "minutes": 30, "reason": "  "}, "reason"),
    ],
)
def test_bad_snooze_input_names_the_field(arguments, field):
    with pytest.raises(SnoozeError) as caught:
        snooze_alerts(actor="alice", **arguments)
    assert caught.value.field == field and not AuditEntry.objects.exists()


def test_a_reason_of_control_characters_only_is_kept_escaped_not_refused():
    """The API's schema accepts any non-blank reason; one made only of what storage strips is
    stored escaped, readable, rather than refused as missing (schemathesis found it)."""
    snooze = snooze_alerts(actor="alice", kind="probe", minutes=30, reason="\u0097")
    assert snooze.reason == "\\x97"
    assert snooze_alerts(actor="alice", kind="other", minutes=30, reason="ok\u202e").reason == "ok"


def test_a_paused_kinds_deaths_are_muted_and_counted_in_its_resume_notice(channels, redis_conn):
    fakes = channels(webhook={})
    pause_kind(kind="probe", actor="alice", reason="backend maintenance")
    for i in range(3):
        make_death(kind="probe", message=f"backend gone '{i}'")
    assert Alert.objects.filter(status=AlertStatus.MUTED).count() == 3
    assert {a.payload["muted"] for a in Alert.objects.filter(status=AlertStatus.MUTED)} == {"paused"}
    resume_kind(kind="probe", actor="alice")
    send_due_alerts()
    [hit] = fakes["webhook"].accepted
    assert hit.body["title"] == "Resumed: probe"
    assert "3 death(s) while it was paused were not alerted one by one." in hit.body["lines"]
