"""The snooze endpoints: an operator token mutes a kind, lists it, lifts it; each audited."""

import json

import pytest

from api.openapi import openapi_document
from deadletters.models import Alert, AlertStatus, AuditEntry
from reports.services.tokens import create_api_token
from tests.api.test_api_contract import validate
from tests.conftest import make_death
from tests.deadletters.alerts.test_alert_path import HEARTBEAT_TOKEN, failing_channel

pytestmark = pytest.mark.django_db


def post(client, path, data=None, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.post(path, json.dumps(data or {}), content_type="application/json", headers=headers)


def test_an_operator_token_snoozes_lists_and_lifts(client, api_token):
    made = post(
        client, "/report/alerts/snooze", {"kind": "probe", "minutes": 30, "reason": "migration"}, api_token
    )
    assert made.status_code == 201 and made.json()["kind"] == "probe" and made.json()["fingerprint"] is None
    make_death(kind="probe")
    assert Alert.objects.get().status == AlertStatus.MUTED
    listed = client.get("/report/alerts/snoozes", headers={"Authorization": f"Bearer {api_token}"}).json()
    assert [s["id"] for s in listed["results"]] == [made.json()["id"]]
    lifted = post(client, f"/report/alerts/snooze/{made.json()['id']}/lift", token=api_token)
    assert lifted.status_code == 200 and lifted.json()["ok"] is True
    assert post(client, f"/report/alerts/snooze/{made.json()['id']}/lift", token=api_token).status_code == 404
    assert list(AuditEntry.objects.order_by("id").values_list("action", "source", "reason")) == [
        ("snooze_alerts", "api", "migration"),
        ("lift_snooze", "api", ""),
    ]


def test_a_token_without_the_operator_scope_cannot_snooze(client):
    reader = create_api_token(name="reader", scopes=("read",))[1]
    answer = post(client, "/report/alerts/snooze", {"kind": "probe", "minutes": 5, "reason": "x"}, reader)
    assert answer.status_code == 403 and not AuditEntry.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"minutes": 5, "reason": "x"}, "fingerprint"),
        ({"kind": "probe", "fingerprint": "a" * 40, "minutes": 5, "reason": "x"}, "fingerprint"),
        ({"fingerprint": "A" * 40, "minutes": 5, "reason": "x"}, "fingerprint"),
        ({"kind": "probe", "minutes": 0, "reason": "x"}, "minutes"),
        ({"kind": "probe", "minutes": True, "reason": "x"}, "minutes"),
        ({"kind": "probe", "minutes": 5, "reason": " "}, "reason"),
    ],
)
def test_bad_input_is_a_422_naming_the_field(client, api_token, body, field):
    answer = post(client, "/report/alerts/snooze", body, api_token)
    assert answer.status_code == 422 and answer.json()["field"] == field


def test_channel_health_names_the_failing_channel_and_never_its_heartbeat_url(client, api_token, settings):
    failing_channel(settings)
    answer = client.get("/report/alerts/channels", headers={"Authorization": f"Bearer {api_token}"})
    schema = openapi_document()["paths"]["/report/alerts/channels"]["get"]["responses"]["200"]
    validate(openapi_document(), schema["content"]["application/json"]["schema"], answer.json())
    ops, pager = answer.json()["results"]
    assert (ops["name"], ops["failing"], ops["heartbeat_minutes"]) == ("ops", False, 5)
    assert (pager["failing"], pager["last_errcode"]) == (True, 401)
    assert pager["last_error"] == "HTTP 401: bad signature"
    assert HEARTBEAT_TOKEN not in answer.content.decode() and "hc.invalid" not in answer.content.decode()
    reader = {"Authorization": f"Bearer {create_api_token(name='reader', scopes=('read',))[1]}"}
    assert client.get("/report/alerts/channels", headers=reader).status_code == 403
