"""Recovery notices: one "resolved" message per quiet period of a cause, on every routed channel
and on DingTalk, naming the cause, its deaths, their span and how many were replayed; a resumed
kind and a finished bulk action say so too. Real Redis, real HTTP to local fakes."""

import time

import pytest

from deadletters.alerts.resolved import _announce, announce_resolved_causes
from deadletters.alerts.sender import send_due_alerts
from deadletters.models import Alert, AlertCategory, CauseState
from deadletters.services.kind_pauses import pause_kind, resume_kind
from deadletters.services.replay import replay_dead_letter
from tests.conftest import make_death
from tests.deadletters.alerts.conftest import CONSOLE
from tests.dingtalk_fake import FakeClock

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_quiet_cause_gets_exactly_one_resolved_notice_per_quiet_period(
    fake_dingtalk, channels, settings, redis_conn
):
    clock = FakeClock()
    robot = fake_dingtalk(clock=clock)
    fakes = channels(
        routes={"slack": {"events": ["resolved"]}}, webhook={"clock": clock}, slack={"clock": clock}
    )
    settings.ALERT_RESOLVED_AFTER_SECONDS = 60
    first = [make_death(kind="sales_summary", message=f"db-{i} refused after {i} ms") for i in range(3)]
    make_death(kind="probe", error_type="app.errors.Other", message="other cause")
    replay_dead_letter(dead_letter_id=first[0].pk, actor="operator", ip_address=None)
    clock.now = time.time()  # the simulated minutes start after the last death, however slow the machine
    send_due_alerts(clock=clock)

    clock.advance(30)
    assert announce_resolved_causes(clock=clock) == 0  # not quiet for long enough yet
    clock.advance(31)
    assert announce_resolved_causes(clock=clock) == 2
    assert announce_resolved_causes(clock=clock) == 0  # one notice per quiet period
    assert announce_resolved_causes(clock=lambda: clock() + 600) == 0

    resolved = Alert.objects.get(
        category=AlertCategory.RESOLVED, fingerprint=first[0].fingerprint, channel="webhook"
    )
    assert resolved.payload | {"started_at": None, "last_death_at": None, "duration_seconds": None} == {
        "fingerprint": first[0].fingerprint,
        "kind": "sales_summary",
        "error_type": "reports.errors.PermanentError",
        "message": "db-2 refused after 2 ms",
        "deaths": 3,
        "replayed": 1,
        "quiet_seconds": 60,
        "started_at": None,
        "last_death_at": None,
        "duration_seconds": None,
    }
    channels_of_notices = Alert.objects.filter(category="resolved").values_list("channel", flat=True)
    assert sorted(channels_of_notices) == ["dingtalk", "dingtalk", "slack", "slack", "webhook", "webhook"]
    for _ in range(3):  # Slack takes one message a second
        send_due_alerts(clock=clock)
        clock.advance(1.5)
    texts = [r.card["text"] for r in robot.accepted if "Resolved" in r.card.get("title", "")]
    assert len(texts) == 2 and any("Replayed so far: 1" in t and "3 task(s)" in t for t in texts)
    assert sorted(h.body["text"] for h in fakes["slack"].accepted) == [
        "Resolved: probe · Other: other cause",
        "Resolved: sales_summary · PermanentError: db-2 refused after 2 ms",
    ]
    assert sum(h.body["event"] == "resolved" for h in fakes["webhook"].accepted) == 2

    # The cause dies again: a new episode, and after its own quiet period one more notice.
    make_death(kind="sales_summary", message="db-9 refused after 9 ms")
    assert announce_resolved_causes(clock=lambda: time.time() + 30) == 0
    assert announce_resolved_causes(clock=lambda: time.time() + 61) == 1
    assert (
        Alert.objects.filter(category="resolved", fingerprint=first[0].fingerprint, channel="webhook").count()
        == 2
    )


def test_two_passes_closing_the_same_episode_write_one_notice(settings):
    settings.ALERT_RESOLVED_AFTER_SECONDS = 60
    make_death()
    stale = CauseState.objects.get()
    assert _announce(stale, 60) == 1 and _announce(stale, 60) == 0
    assert Alert.objects.filter(category="resolved").count() == 1


def test_a_death_during_the_pass_keeps_the_episode_open(settings):
    make_death()
    read_before_the_death = CauseState.objects.get()
    make_death()
    assert _announce(read_before_the_death, 60) == 0
    assert CauseState.objects.get().episode_deaths == 2


def test_a_resumed_kind_says_so(channels, redis_conn):
    fakes = channels(webhook={})
    pause_kind(kind="probe", actor="operator")
    resume_kind(kind="probe", actor="operator")
    send_due_alerts()
    [hit] = fakes["webhook"].accepted
    assert hit.body["event"] == "resolved" and hit.body["title"] == "Resumed: probe"


def test_a_finished_bulk_action_says_so(channels, redis_conn):
    from tests.deadletters.bulk.test_actions import letters, run, start

    fakes = channels(webhook={})
    chosen = letters(3)
    bulk = start("archive", scope="selected", ids=[x.pk for x in chosen])
    run(bulk)
    send_due_alerts()
    [hit] = fakes["webhook"].accepted
    assert hit.body["event"] == "resolved" and hit.body["title"] == "Bulk archive: completed"
    assert hit.body["lines"] == ["3 letters: 3 done, 0 skipped."]
    assert hit.body["links"] == [
        {"label": "Open the run", "url": f"{CONSOLE}/console/bulk/{bulk.public_id}/"}
    ]
