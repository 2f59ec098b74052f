"""Bulk actions through the API with a console session: each needs the permission of its own
action, as in the console, whatever endpoint names it (start, pause, resume, cancel, rate)."""

import json

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from deadletters.models import BulkAction, BulkActionStatus, DeadLetter, DeadLetterStatus
from tests.factories import make_dead_letter

pytestmark = pytest.mark.django_db


def session(django_user_model, *codenames) -> Client:
    user = django_user_model.objects.create_user("replayer", password="pw-123456789", is_staff=True)
    for codename in codenames:
        app, name = codename.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app, codename=name))
    client = Client()
    client.force_login(user)
    return client


def post(client, path, body=None):
    return client.post(path, data=json.dumps(body or {}), content_type="application/json")


def test_a_user_allowed_only_to_replay_cannot_discard_or_steer_an_archive_run(django_user_model):
    letters = [make_dead_letter() for _ in range(3)]
    client = session(django_user_model, "deadletters.replay_deadletter", "deadletters.view_bulkaction")

    for action in ("discard", "archive"):
        denied = post(client, "/report/bulk/start", {"action": action, "reason": "cleanup"})
        assert denied.status_code == 403, denied.content
        assert "deadletters.archive_deadletter" in denied.json()["error"]
    assert not BulkAction.objects.exists()
    assert set(DeadLetter.objects.values_list("status", flat=True)) == {DeadLetterStatus.OPEN}

    archive_run = BulkAction.objects.create(
        action="archive", status=BulkActionStatus.PAUSED, total=len(letters), rate_per_second=1.0
    )
    for change, body in (("pause", {}), ("resume", {}), ("cancel", {}), ("rate", {"rate_per_second": 50})):
        denied = post(client, f"/report/bulk/{archive_run.public_id}/{change}", body)
        assert denied.status_code == 403, (change, denied.content)
    archive_run.refresh_from_db()
    assert (archive_run.status, archive_run.rate_per_second) == (BulkActionStatus.PAUSED, 1.0)

    # The replay itself is what this user may do.
    started = post(client, "/report/bulk/start", {"action": "replay", "reason": "fixed", "dry_run": True})
    assert started.json() == {"dry_run": True, "count": 3, "superseded": 0}
