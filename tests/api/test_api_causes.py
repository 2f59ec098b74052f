"""One cause in the API: marked fixed in the next release (the replay permission, as it replays),
muted until a threshold (the snooze permission), shown; bad input is a 4xx naming the field; each
refused to whoever lacks the permission; each audited."""

import json

import pytest
from django.contrib.auth.models import Permission

from deadletters.models import AlertSnooze, AuditEntry, CauseState
from reports.services.tokens import create_api_token
from tests.conftest import make_death

pytestmark = pytest.mark.django_db
CAUSE = "/report/cause/"


def post(client, path, data=None, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = data if isinstance(data, str) else json.dumps(data or {})
    return client.post(path, body, content_type="application/json", headers=headers)


@pytest.fixture
def cause(settings):
    settings.RELEASE_NAME = "v7"
    return make_death(message="ledger locked 'a'").fingerprint


def test_an_operator_token_marks_a_cause_fixed_shows_it_and_unmarks_it(client, api_token, cause):
    marked = post(client, f"{CAUSE}{cause}/fixed", token=api_token)
    assert marked.status_code == 200 and marked.json()["changed"] is True
    assert marked.json()["fixed"]["state"] == "marked" and marked.json()["fixed"]["marked_under"] == "v7"
    assert marked.json()["releases"] == [{"release": "v7", "deaths": 1}]
    assert post(client, f"{CAUSE}{cause}/fixed", token=api_token).json()["changed"] is False
    shown = client.get(f"{CAUSE}{cause}", headers={"Authorization": f"Bearer {api_token}"}).json()
    assert shown["fixed"]["marked_by"] == "token:test-client" and shown["mute"] is None
    assert post(client, f"{CAUSE}{cause}/fixed", {"undo": True}, api_token).json()["fixed"] is None
    assert list(AuditEntry.objects.filter(source="api").values_list("action", flat=True)) == [
        "cause_unmark_fixed", "cause_mark_fixed"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "per_minute"),
        ({"per_minute": 0}, "per_minute"),
        ({"total": 1_000_001}, "total"),
        ({"total": "50"}, "total"),
        ({"per_minute": True}, "per_minute"),
        ({"total": 5, "reason": "x" * 2001}, "reason"),
    ],
)
def test_a_bad_threshold_is_a_422_naming_the_field(client, api_token, body, field):
    answer = post(client, f"{CAUSE}{'a' * 40}/mute", body, api_token)
    assert answer.status_code == 422 and answer.json()["field"] == field
    assert not AlertSnooze.objects.exists()


def test_a_mute_until_a_threshold_runs_and_is_audited(client, api_token):
    made = post(client, f"{CAUSE}{'b' * 40}/mute", {"per_minute": 30, "reason": "noisy\u202e"}, api_token)
    assert made.status_code == 201
    assert (made.json()["per_minute"], made.json()["total"], made.json()["deaths"]) == (30, None, 0)
    [entry] = AuditEntry.objects.filter(action="snooze_alerts")
    assert (entry.source, entry.reason, entry.details["per_minute"]) == ("api", "noisy", 30)


def test_who_lacks_the_permission_is_refused_and_nothing_changes(
    client, django_user_model, cause
):
    reader = create_api_token(name="reader", scopes=("read",))[1]
    assert post(client, f"{CAUSE}{cause}/fixed", token=reader).status_code == 403
    assert post(client, f"{CAUSE}{cause}/mute", {"total": 5}, reader).status_code == 403
    viewer = django_user_model.objects.create_user("viewer", password="pw-123456789", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_deadletter"))
    client.force_login(viewer)
    assert post(client, f"{CAUSE}{cause}/fixed").status_code == 403  # a session without the permission
    assert post(client, f"{CAUSE}{cause}/mute", {"total": 5}).status_code == 403
    assert not CauseState.objects.filter(fixed_marked_at__isnull=False).exists()
    assert not AlertSnooze.objects.exists() and not AuditEntry.objects.exists()
