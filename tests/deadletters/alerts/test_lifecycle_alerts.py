"""The alerts of a cause's lifecycle, through the one alert stack to every channel: a cause marked
fixed that dies again under a later release raises one regression naming both releases; a cause
muted until a threshold is counted, not sent, until one death goes over it and says so."""

import pytest

from deadletters.alerts.sender import send_due_alerts
from deadletters.alerts.snooze import SnoozeError, announce_ended_snoozes, snooze_alerts
from deadletters.fingerprints import fingerprint
from deadletters.models import Alert, AlertSnooze, AlertStatus, AuditEntry, CauseRelease
from deadletters.selectors.causes import cause_lifecycles
from deadletters.services.cause_lifecycle import cause_mark_fixed, release_replay_fixed_causes
from tests.conftest import make_death

pytestmark = pytest.mark.django_db(transaction=True)
ERROR = "reports.errors.PermanentError"


def test_a_fixed_cause_dying_under_a_later_release_raises_one_regression_naming_both(
    settings, fake_dingtalk, channels, redis_conn
):
    robot = fake_dingtalk()
    fakes = channels(webhook={})
    settings.RELEASE_NAME = "v41"
    first = make_death(message="ledger locked 'a'")
    send_due_alerts()
    cause_mark_fixed(fingerprint=first.fingerprint, actor="alice")
    settings.RELEASE_NAME = "v42\x1b[31m"  # what the deployment names it, control characters and all
    release_replay_fixed_causes()
    settings.RELEASE_NAME = "v41"
    make_death(message="ledger locked 'b'")  # an old worker still on the release it was marked under
    send_due_alerts()
    assert [h.body["title"] for h in fakes["webhook"].accepted if "Regression" in h.body["title"]] == []

    settings.RELEASE_NAME = "v43"
    make_death(message="ledger locked 'c'")
    make_death(message="ledger locked 'd'")
    send_due_alerts()

    [regression] = [h.body for h in fakes["webhook"].accepted if h.body["title"].startswith("Regression: ")]
    assert regression["event"] == "regression"
    named = "Regression: marked fixed under release v41, fixed in v42(31m, died again under v43."
    assert named in regression["lines"]
    [card] = [r.card for r in robot.accepted if r.card["title"].startswith("Regression: ")]
    assert "v41" in card["text"] and "v43" in card["text"]
    [entry] = AuditEntry.objects.filter(action="cause_regressed")
    assert entry.source == "system" and entry.details["died_under"] == "v43"
    found = cause_lifecycles([first.fingerprint])[first.fingerprint]
    assert found["fixed"]["state"] == "regressed" and found["fixed"]["regressed_under"] == "v43"
    assert found["releases"] == [{"release": "v43", "deaths": 2}, {"release": "v41", "deaths": 2}]
    assert CauseRelease.objects.filter(release__startswith="v42").count() == 0


def titles(fake) -> list[str]:
    return [hit.body["title"] for hit in fake.accepted]


def test_a_mute_until_a_total_counts_deaths_then_the_one_over_it_alerts_once(
    fake_dingtalk, channels, redis_conn
):
    robot = fake_dingtalk()
    fakes = channels(webhook={})
    cause = fingerprint(ERROR, "quota exceeded 'a'")
    snooze = snooze_alerts(fingerprint=cause, total=3, reason="known\x07 flake\u202e", actor="bob")
    [entry] = AuditEntry.objects.filter(action="snooze_alerts")
    assert entry.details["total"] == 3 and entry.reason == "known flake" and snooze.reason == "known flake"

    for i in range(3):
        make_death(message=f"quota exceeded '{i}'")
    send_due_alerts()
    assert Alert.objects.filter(status=AlertStatus.MUTED).count() == 3
    assert titles(fakes["webhook"]) == [] and robot.accepted == []

    over = make_death(message="quota exceeded 'x'")
    make_death(message="quota exceeded 'y'")  # after the mute ended: an ordinary death of the cause
    send_due_alerts()

    crossed = [hit.body for hit in fakes["webhook"].accepted if hit.body["event"] == "threshold"]
    assert len(crossed) == 1 and crossed[0]["title"].startswith("Threshold crossed: probe · PermanentError")
    assert (
        "Threshold crossed: 4 deaths since it was muted, more than the 3 in total it was muted until; "
        "its alerts are no longer muted." in crossed[0]["lines"]
    )
    assert sum("Threshold crossed" in r.card["title"] for r in robot.accepted) == 1
    assert {a.status for a in over.alerts.all()} == {AlertStatus.SENT}
    snooze.refresh_from_db()
    assert snooze.ended_at is not None and snooze.deaths == 4
    assert AuditEntry.objects.filter(action="mute_threshold_crossed", source="system").count() == 1
    assert announce_ended_snoozes() == 0  # the crossing said it: no summary besides


def test_a_mute_per_minute_ends_with_the_death_over_it(redis_conn):
    cause = fingerprint(ERROR, "slow upstream 'a'")
    snooze = snooze_alerts(fingerprint=cause, per_minute=2, actor="bob", reason="")
    statuses = [make_death(message=f"slow upstream '{i}'").alerts.get().status for i in range(3)]
    assert statuses == [AlertStatus.MUTED, AlertStatus.MUTED, AlertStatus.SKIPPED]  # no channel: skipped
    lifecycle = Alert.objects.order_by("-id").first().payload["lifecycle"]
    assert (lifecycle["event"], lifecycle["per_minute"], lifecycle["last_minute"]) == ("threshold", 2, 3)
    assert not AlertSnooze.objects.filter(pk=snooze.pk, ended_at__isnull=True).exists()
    assert cause_lifecycles([cause])[cause]["mute"] is None


@pytest.mark.parametrize(
    "given", [{"per_minute": 0}, {"total": 1_000_001}, {"total": "x"}, {"per_minute": True}]
)
def test_a_threshold_is_a_whole_number_of_deaths_from_one_to_a_million(given):
    with pytest.raises(SnoozeError) as refused:
        snooze_alerts(fingerprint="a" * 40, actor="bob", reason="", **given)
    assert refused.value.field == next(iter(given))
    with pytest.raises(SnoozeError) as refused:
        snooze_alerts(kind="probe", total=5, actor="bob", reason="x")
    assert refused.value.field == "kind"
