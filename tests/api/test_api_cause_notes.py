"""A cause's runbook note through the API: an operator token writes, reads and clears it, audited;
hostile input is a 422 naming the field; reading needs view, writing the replay permission."""

import json

import pytest
from django.contrib.auth.models import Permission

from deadletters.models import AuditEntry
from reports.services.tokens import create_api_token
from tests.conftest import make_death

pytestmark = pytest.mark.django_db


def put(client, path, data, **headers):
    return client.put(path, json.dumps(data), content_type="application/json", headers=headers)


@pytest.fixture
def note_path():
    return f"/report/cause/{make_death().fingerprint}/note"


def test_an_operator_token_writes_reads_and_clears_a_note(token_client, note_path):
    body = {"text": {"en": " Owner: payments\r\n\tcall #ops ", "zh-hans": ""}, "links": ["https://wiki.example.com/x"]}
    written = put(token_client, note_path, body)

    assert written.status_code == 200, written.json()
    assert written.json()["text"] == {"en": "Owner: payments\ncall #ops"}
    assert token_client.get(note_path).json() == written.json()
    cleared = token_client.delete(note_path)
    assert cleared.status_code == 200 and cleared.json()["text"] == {} and cleared.json()["links"] == []
    assert list(AuditEntry.objects.order_by("id").values_list("action", "source")) == [
        ("cause_note", "api"), ("cause_note_clear", "api")
    ]
    assert token_client.get(f"/report/cause/{'0' * 40}/note").status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"links": ["javascript:alert(1)"]}, "links"),
        ({"links": ["https://user:secret@wiki.example.com/"]}, "links"),
        ({"links": ["https://wiki.example.com/" + "a" * 500]}, "links"),
        ({"links": [f"https://wiki.example.com/{n}" for n in range(6)]}, "links"),
        ({"text": {"en": "x" * 2001}}, "text.en"),
        ({"text": {"zh-hans": 5}}, "text.zh-hans"),
        ({"text": {"fr": "non"}}, "text"),
    ],
)
def test_hostile_input_is_a_422_naming_the_field(token_client, note_path, body, field):
    answer = put(token_client, note_path, body)
    assert answer.status_code == 422 and answer.json()["field"] == field
    assert not AuditEntry.objects.exists()


def test_reading_needs_the_view_and_writing_the_replay_permission(client, django_user_model, note_path):
    reader = create_api_token(name="reader", scopes=("read",))[1]
    assert client.get(note_path, headers={"Authorization": f"Bearer {reader}"}).status_code == 403
    staff = django_user_model.objects.create_user("viewer", password="pw-123456789", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_deadletter"))
    client.force_login(staff)

    assert client.get(note_path).status_code == 200
    assert put(client, note_path, {"text": {"en": "mine now"}}).status_code == 403
    assert client.delete(note_path).status_code == 403
    assert not AuditEntry.objects.exists()
