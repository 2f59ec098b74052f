"""A cause's runbook note in the console: written from a dead letter's page (audited, refused
without the replay permission, a bad link a 400 naming the field), shown there and on the groups
page, escaped."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from deadletters.models import AuditEntry, CauseState
from tests.conftest import make_death, operators_group

pytestmark = pytest.mark.django_db


def login(client, name: str, *, operator: bool):
    user = get_user_model().objects.create_user(name, f"{name}@example.invalid", "pw-12345678", is_staff=True)
    if operator:
        user.groups.add(operators_group())
    else:
        user.user_permissions.add(Permission.objects.get(codename="view_deadletter"))
    client.force_login(user)
    return client


def test_an_operator_writes_a_note_that_the_letter_and_groups_pages_show(client):
    letter = make_death()
    page = f"/console/dead-letters/{letter.pk}/"
    note_url = f"/console/causes/{letter.fingerprint}/note/"
    login(client, "op", operator=True)
    assert f'action="{note_url}"' in client.get(page).content.decode()

    answer = client.post(note_url, {"text_en": "Owner: <b>payments</b>\nrestart the exporter",
                                    "text_zh-hans": "负责人：支付组", "links": "https://wiki.example.com/orders\n",
                                    "next": page})

    assert answer.status_code == 302 and answer["Location"] == page
    detail = client.get(page).content.decode()
    link = 'href="https://wiki.example.com/orders"'
    assert "Owner: &lt;b&gt;payments&lt;/b&gt;<br>restart the exporter" in detail
    assert "负责人：支付组" in detail and link in detail
    groups = client.get("/console/dead-letters/groups/").content.decode()
    assert "Owner: &lt;b&gt;payments&lt;/b&gt;" in groups and link in groups
    assert "restart the exporter" not in groups
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.actor, entry.details["links"]) == ("cause_note", "op", ["https://wiki.example.com/orders"])


def test_a_javascript_link_is_a_400_naming_the_field_and_changes_nothing(client):
    letter = make_death()
    login(client, "op", operator=True)
    answer = client.post(f"/console/causes/{letter.fingerprint}/note/",
                         {"text_en": "x", "links": "javascript:alert(document.cookie)"})
    assert answer.status_code == 400 and "links:" in answer.content.decode()
    assert CauseState.objects.get().note_at is None and not AuditEntry.objects.exists()


def test_writing_a_note_needs_the_replay_permission(client):
    letter = make_death()
    login(client, "viewer", operator=False)
    assert client.post(f"/console/causes/{letter.fingerprint}/note/", {"text_en": "mine"}).status_code == 403
    assert "/note/" not in client.get(f"/console/dead-letters/{letter.pk}/").content.decode()
    assert CauseState.objects.get().note_at is None
