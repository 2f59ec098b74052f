"""A kind's circuit breaker through the API (POST /report/kind/<kind>/breaker): held and closed by
an operator, audited; thresholds out of bounds refused naming the field, nothing written; the
permission of pausing a kind; a bulk replay that waits for a breaker."""

import json

import pytest
from django.test import Client

from deadletters.models import AuditEntry, BulkAction
from reports.models import KindBreaker, PausedKind
from reports.services.breakers import BREAKER
from reports.services.tokens import create_api_token
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db


def client_for(*scopes):
    return Client(HTTP_AUTHORIZATION=f"Bearer {create_api_token(name='-'.join(scopes), scopes=scopes)[1]}")


def post(client, path, body):
    return client.post(path, data=json.dumps(body), content_type="application/json")


def test_an_operator_holds_and_closes_a_breaker(upstream_kind):
    operator = client_for("read", "operator")
    held = post(operator, "/report/kind/http_export/breaker",
                {"action": "hold", "failures_to_open": 7, "reason": "the vendor's maintenance"})
    assert held.status_code == 200, held.content
    assert held.json() == {"ok": True, "kind": "http_export", "state": "held", "changed": True,
                           "failures_to_open": 7, "window_seconds": 60, "probes_to_close": 2}
    assert PausedKind.objects.get(kind="http_export").paused_by == BREAKER
    assert post(operator, "/report/kind/http_export/breaker", {"action": "hold"}).json()["changed"] is False

    closed = post(operator, "/report/kind/http_export/breaker", {"action": "close"}).json()
    assert (closed["state"], closed["changed"]) == ("closed", True) and not PausedKind.objects.exists()
    entries = list(AuditEntry.objects.order_by("pk").values_list("action", "actor", "source", "reason"))
    assert entries == [("breaker_held", "token:read-operator", "api", "the vendor's maintenance"),
                       ("breaker_closed", "token:read-operator", "api", "")]


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"failures_to_open": 0}, 422, "failures_to_open"),
    ({"window_seconds": 86_401}, 422, "window_seconds"),
    ({"probes_to_close": "3"}, 422, "probes_to_close"),
    ({"probes_to_close": True}, 422, "probes_to_close"),
    ({"action": "explode"}, 422, "action"),
    ({"action": "open", "probes_to_close": 101}, 422, "probes_to_close"),
    ({}, 422, "action"),
    ({"action": "open", "canary": 1}, 400, "canary"),
])
def test_bad_thresholds_and_actions_are_refused_naming_the_field(upstream_kind, body, status, field):
    before = list(KindBreaker.objects.values())
    response = post(client_for("read", "operator"), "/report/kind/http_export/breaker", body)
    assert (response.status_code, response.json()["field"]) == (status, field)
    assert list(KindBreaker.objects.values()) == before and not AuditEntry.objects.exists()
    assert not PausedKind.objects.exists()


def test_a_kind_without_an_upstream_has_no_breaker_and_an_unknown_kind_is_404():
    operator = client_for("read", "operator")
    probe = post(operator, "/report/kind/probe/breaker", {"action": "open"})
    assert (probe.status_code, probe.json()["field"]) == (409, "kind")
    assert post(operator, "/report/kind/nope/breaker", {"action": "open"}).status_code == 404


def test_the_breaker_needs_the_permission_of_pausing_a_kind(upstream_kind, django_user_model):
    assert post(client_for("read", "replay"), "/report/kind/http_export/breaker", {"action": "open"}
                ).status_code == 403
    viewer = django_user_model.objects.create_user("viewer", password="pw-123456789", is_staff=True)
    session = Client()
    session.force_login(viewer)
    assert post(session, "/report/kind/http_export/breaker", {"action": "open"}).status_code == 403
    assert not PausedKind.objects.exists() and not AuditEntry.objects.exists()


def test_a_bulk_replay_waits_for_the_breaker(upstream_kind):
    operator = client_for("read", "operator")
    make_dead_letter(task=make_task(kind="http_export", status="dead", attempt=3))
    post(operator, "/report/kind/http_export/breaker", {"action": "hold"})
    started = post(operator, "/report/bulk/start", {"action": "replay", "filter": {"kind": "http_export"},
                                                     "after_breaker_of": "http_export"})
    assert started.status_code == 202, started.content
    assert (started.json()["status"], started.json()["after_breaker_of"]) == ("scheduled", "http_export")
    refused = post(operator, "/report/bulk/start", {"action": "archive", "after_breaker_of": "http_export"})
    assert (refused.status_code, refused.json()["field"]) == (422, "after_breaker_of")
    assert BulkAction.objects.count() == 1
