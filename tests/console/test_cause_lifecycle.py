"""A cause's lifecycle on the causes page: its releases, marking it fixed in the next release (the
replay permission) and muting it until a threshold (the snooze permission), refused without them."""

import pytest
from django.contrib.auth.models import Permission

from deadletters.models import AlertSnooze, AuditEntry, CauseState
from tests.conftest import make_death

pytestmark = pytest.mark.django_db


@pytest.fixture
def cause(settings):
    settings.RELEASE_NAME = "v7"
    return make_death(message="ledger locked 'a'").fingerprint


def staff(django_user_model, name, *codenames):
    user = django_user_model.objects.create_user(name, password="pw-123456789", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


def test_who_may_only_view_cannot_mark_or_mute_a_cause(client, django_user_model, cause):
    client.force_login(staff(django_user_model, "viewer", "view_deadletter"))
    assert client.post(f"/console/causes/{cause}/fixed/").status_code == 403
    assert client.post("/console/alerts/snooze/", {"fingerprint": cause, "total": 5}).status_code == 403
    assert "Fixed in the next release" not in client.get("/console/dead-letters/groups/").content.decode()
    assert not CauseState.objects.filter(fixed_marked_at__isnull=False).exists()
    assert not AlertSnooze.objects.exists() and not AuditEntry.objects.exists()


def test_the_console_marks_a_cause_fixed_and_mutes_it_until_a_threshold(client, django_user_model, cause):
    client.force_login(staff(django_user_model, "op", "view_deadletter", "replay_deadletter"))
    marked = client.post(f"/console/causes/{cause}/fixed/", {"next": "/console/dead-letters/groups/"})
    assert marked.status_code == 302 and CauseState.objects.get(fingerprint=cause).fixed_marked_by == "op"
    muted = client.post("/console/alerts/snooze/", {"fingerprint": cause, "total": "20", "reason": "flaky"})
    assert muted.status_code == 302 and AlertSnooze.objects.get().total == 20
    page = client.get("/console/dead-letters/groups/").content.decode()
    assert "Marked fixed in the next release by op (under v7)." in page and "v7</span> ×1" in page
    assert "Muted until more than 20 deaths in total." in page
    refused = client.post("/console/alerts/snooze/", {"fingerprint": cause, "per_minute": "0"})
    assert refused.status_code == 400 and "1000000" in refused.content.decode()
    blank = client.post("/console/alerts/snooze/", {"fingerprint": cause, "per_minute": "", "total": ""})
    assert blank.status_code == 400 and "a minute, in total, or both" in blank.content.decode()
