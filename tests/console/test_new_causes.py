"""The console marks new causes: a "new" badge on the groups page and on a dead letter's page
for a cause first seen within the last day, or "new since <release>" for one first seen under
the release the deployment names (RELEASE_NAME)."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from deadletters.models import CauseState
from tests.conftest import make_death, operators_group

pytestmark = pytest.mark.django_db


@pytest.fixture
def op_client(client):
    user = get_user_model().objects.create_user("op", "op@example.invalid", "pw-op-12345", is_staff=True)
    user.groups.add(operators_group())
    client.force_login(user)
    return client


def badges(html: str) -> list[str]:
    return re.findall(r'<span class="badge badge-new"[^>]*>([^<]*)</span>', html)


def test_a_cause_first_seen_today_is_new_and_an_old_one_is_not(op_client):
    fresh = make_death(error_type="app.errors.Fresh", message="fresh")
    old = make_death(error_type="app.errors.Old", message="old")
    CauseState.objects.filter(fingerprint=old.fingerprint).update(
        first_seen_at=timezone.now() - timedelta(days=3)
    )

    page = op_client.get("/console/dead-letters/groups/").content.decode()
    assert badges(page) == ["new"]
    fresh_row = page[page.index('<code class="mono">app.<wbr>errors.<wbr>Fresh') :].split("</tr>")[0]
    assert "badge-new" in fresh_row
    assert badges(op_client.get(f"/console/dead-letters/{fresh.pk}/").content.decode()) == ["new"]
    assert badges(op_client.get(f"/console/dead-letters/{old.pk}/").content.decode()) == []


def test_with_a_release_name_new_means_first_died_under_that_release(op_client, settings):
    settings.RELEASE_NAME = "v1.8"
    before = make_death(error_type="app.errors.Before", message="before")
    settings.RELEASE_NAME = "v1.9"
    after = make_death(error_type="app.errors.After", message="after")
    again = make_death(error_type="app.errors.Before", message="before")  # an old cause dies again

    assert before.alerts.get().payload["release"] == "v1.8" and "new" not in again.alerts.get().payload
    assert after.alerts.get().payload["new"] is True and after.alerts.get().payload["release"] == "v1.9"
    assert badges(op_client.get("/console/dead-letters/groups/").content.decode()) == ["new since v1.9"]
    assert badges(op_client.get(f"/console/dead-letters/{again.pk}/").content.decode()) == []
