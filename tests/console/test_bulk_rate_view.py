"""The rate form on a bulk action's page: POST only, the action's permission, audited, a bad
value is a 400 page that changes nothing, a finished bulk says so."""

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from deadletters.bulk.control import start_bulk_action
from deadletters.bulk.selection import build_selection
from deadletters.models import AuditEntry, BulkAction, BulkActionStatus
from tests.conftest import operators_group
from tests.factories import make_dead_letter

pytestmark = pytest.mark.django_db


@pytest.fixture
def bulk(db):
    make_dead_letter()
    made, _ = start_bulk_action(
        selection=build_selection(action="replay", scope="filter"),
        actor="alice",
        ip_address=None,
        rate_per_second=5,
    )
    return made


def client_for(django_user_model, username, *, group=True, perms=()):
    user = django_user_model.objects.create_user(
        username, f"{username}@example.invalid", "pw-123456789", is_staff=True
    )
    if group:
        user.groups.add(operators_group())
    for codename in perms:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="deadletters", codename=codename)
        )
    client = Client(REMOTE_ADDR="10.4.4.4")
    client.force_login(user)
    return client


def test_the_page_offers_the_rate_form_and_a_post_changes_it(bulk, django_user_model):
    client = client_for(django_user_model, "carol")
    page = client.get(reverse("console:bulk-detail", args=[bulk.public_id])).content.decode()
    assert f'action="{reverse("console:bulk-rate", args=[bulk.public_id])}"' in page
    assert 'name="rate_per_second"' in page and 'value="5"' in page

    response = client.post(
        reverse("console:bulk-rate", args=[bulk.public_id]), {"rate_per_second": "250"}, follow=True
    )

    assert response.redirect_chain[-1][0] == reverse("console:bulk-detail", args=[bulk.public_id])
    assert "now runs at 250 per second" in response.content.decode()
    assert BulkAction.objects.get(pk=bulk.pk).rate_per_second == 250
    [audit] = AuditEntry.objects.filter(action="bulk_rate")
    assert (
        audit.actor,
        audit.ip_address,
        audit.details["rate_before"],
        audit.details["rate_per_second"],
    ) == (
        "carol",
        "10.4.4.4",
        5,
        250,
    )


@pytest.mark.parametrize("value", ["", "0", "-1", "nan", "inf", "1e12", "fast", "\x00"])
def test_a_bad_rate_is_a_400_page_and_changes_nothing(bulk, django_user_model, value):
    client = client_for(django_user_model, "carol")

    response = client.post(reverse("console:bulk-rate", args=[bulk.public_id]), {"rate_per_second": value})

    assert response.status_code == 400
    assert "rate: must be" in response.content.decode()
    assert BulkAction.objects.get(pk=bulk.pk).rate_per_second == 5
    assert not AuditEntry.objects.filter(action="bulk_rate").exists()


def test_only_a_post_by_someone_allowed_to_replay_changes_the_rate(bulk, django_user_model):
    viewer = client_for(
        django_user_model, "viewer", group=False, perms=("view_deadletter", "view_bulkaction")
    )
    url = reverse("console:bulk-rate", args=[bulk.public_id])

    assert viewer.post(url, {"rate_per_second": "100"}).status_code == 403
    assert (
        "bulk-rate" not in viewer.get(reverse("console:bulk-detail", args=[bulk.public_id])).content.decode()
    )
    assert client_for(django_user_model, "carol").get(url).status_code == 405
    assert BulkAction.objects.get(pk=bulk.pk).rate_per_second == 5


def test_a_finished_bulk_keeps_its_rate_and_hides_the_form(bulk, django_user_model):
    BulkAction.objects.filter(pk=bulk.pk).update(status=BulkActionStatus.COMPLETED)
    client = client_for(django_user_model, "carol")

    response = client.post(
        reverse("console:bulk-rate", args=[bulk.public_id]), {"rate_per_second": "9"}, follow=True
    )

    assert "cannot change the rate of a bulk action that is completed" in response.content.decode()
    assert "Change rate" not in response.content.decode()
    assert BulkAction.objects.get(pk=bulk.pk).rate_per_second == 5
