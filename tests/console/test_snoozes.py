"""Muting alerts from the console: a cause from the groups page or a dead letter's page, a kind
from the snoozes page; listing and lifting; each audited; refused without the replay permission."""

import pytest
from django.contrib.auth import get_user_model

from deadletters.models import Alert, AlertSnooze, AlertStatus, AuditEntry
from tests.conftest import make_death, operators_group

pytestmark = pytest.mark.django_db


@pytest.fixture
def op_client(client):
    user = get_user_model().objects.create_user("op", "op@example.invalid", "pw-op-12345", is_staff=True)
    user.groups.add(operators_group())
    client.force_login(user)
    return client


def test_mute_a_cause_from_its_dead_letter_page_then_lift_it(op_client):
    letter = make_death()
    page = op_client.get(f"/console/dead-letters/{letter.pk}/").content.decode()
    assert 'action="/console/alerts/snooze/"' in page and f'value="{letter.fingerprint}"' in page
    assert (
        'action="/console/alerts/snooze/"' in op_client.get("/console/dead-letters/groups/").content.decode()
    )

    answer = op_client.post(
        "/console/alerts/snooze/",
        {
            "fingerprint": letter.fingerprint,
            "minutes": "45",
            "reason": "DBA on it",
            "next": f"/console/dead-letters/{letter.pk}/",
        },
    )
    assert answer.status_code == 302 and answer["Location"] == f"/console/dead-letters/{letter.pk}/"
    snooze = AlertSnooze.objects.get()
    assert snooze.fingerprint == letter.fingerprint and snooze.created_by == "op"
    make_death()
    assert Alert.objects.order_by("-id").first().status == AlertStatus.MUTED
    listing = op_client.get("/console/alerts/snoozes/").content.decode()
    assert "DBA on it" in listing and letter.fingerprint[:12] in listing

    assert op_client.post(f"/console/alerts/snoozes/{snooze.pk}/lift/").status_code == 302
    assert "No alerts are muted" in op_client.get("/console/alerts/snoozes/").content.decode()
    entries = AuditEntry.objects.order_by("id").values_list("action", "actor", "source")
    assert list(entries) == [("snooze_alerts", "op", "console"), ("lift_snooze", "op", "console")]


def test_mute_a_kind_and_a_bad_form_says_why(op_client):
    assert (
        op_client.post(
            "/console/alerts/snooze/", {"kind": "probe", "minutes": "10", "reason": "canary noise"}
        ).status_code
        == 302
    )
    assert AlertSnooze.objects.get().kind == "probe"
    refused = op_client.post("/console/alerts/snooze/", {"kind": "probe", "minutes": "10", "reason": " "})
    assert refused.status_code == 400 and "say why the alerts are muted" in refused.content.decode()
    offsite = op_client.post(
        "/console/alerts/snooze/",
        {"kind": "probe", "minutes": "5", "reason": "x", "next": "https://evil.example/"},
    )
    assert offsite["Location"] == "/console/alerts/snoozes/"


def test_staff_without_the_replay_permission_cannot_mute(client):
    user = get_user_model().objects.create_user("viewer", "v@example.invalid", "pw-v-12345", is_staff=True)
    client.force_login(user)
    answer = client.post("/console/alerts/snooze/", {"kind": "probe", "minutes": "10", "reason": "x"})
    assert answer.status_code == 403 and not AlertSnooze.objects.exists()
