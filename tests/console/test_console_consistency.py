"""What the console says agrees with itself: filters do what their labels say, counts and attempt
numbers read the same on every page, links lead somewhere the reader may go."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from deadletters.models import AuditEntry
from tests.conftest import operators_group
from tests.factories import make_dead_letter, make_task
from reports.models import TaskStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def op_client(client):
    user = get_user_model().objects.create_user("op", "op@example.invalid", "pw-op-12345", is_staff=True)
    user.groups.add(operators_group())
    client.force_login(user)
    return client


def text(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def selected_options(body: str, name: str) -> list[str]:
    select = re.search(rf'<select name="{name}">(.*?)</select>', body, re.S).group(1)
    return re.findall(r'<option value="([^"]*)" selected>', select)


def test_audit_actor_filter_system_means_entries_nobody_signed(op_client):
    letter = make_dead_letter()
    AuditEntry.objects.create(actor="", action="alert", source="worker", dead_letter=letter, reason="by the worker")
    AuditEntry.objects.create(actor="alice", action="replay", dead_letter=letter, reason="by alice")

    unfiltered = text(op_client.get("/console/audit/"))
    assert selected_options(unfiltered, "actor") == []  # "anyone", not "(system)"
    assert '<option value="(system)">(system)</option>' in unfiltered
    assert "by the worker" in unfiltered and "by alice" in unfiltered

    system = text(op_client.get("/console/audit/", {"actor": "(system)"}))
    assert selected_options(system, "actor") == ["(system)"]
    assert "by the worker" in system and "by alice" not in system
    alice = text(op_client.get("/console/audit/", {"actor": "alice"}))
    assert "by alice" in alice and "by the worker" not in alice
