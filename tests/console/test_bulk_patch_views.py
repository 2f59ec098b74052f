"""The bulk replay's params patch in the console: the preview page's patch field, its diff sample and
invalid count, a run started with it, a malformed patch, and the edit permission it needs."""

import json

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from deadletters.models import BulkAction
from tests.conftest import operators_group
from tests.deadletters.bulk.test_patch import sales_letters

pytestmark = pytest.mark.django_db

PATCH_TEXT = '{"set": {"format": "xlsx"}, "replace": {"*": {"from": "2026-10", "to": "2026-11"}}}'


def console_user(django_user_model, *, may_edit: bool) -> Client:
    user = django_user_model.objects.create_user("alice", "a@example.invalid", "pw-123456789", is_staff=True)
    user.groups.add(operators_group())  # view, replay, archive and edit-and-replay
    if not may_edit:
        user.user_permissions.add(*operators_group().permissions.exclude(codename="replay_edited_deadletter"))
        user.groups.clear()
    client = Client()
    client.force_login(user)
    return client


def form(client, **fields) -> dict:
    preview = client.post(reverse("console:bulk-preview"), {"action": "replay", "scope": "filter"})
    return {"action": "replay", "scope": "filter", "filter_qs": "", "reason": "month moved",
            "max_id": preview.context["selection"].max_id, "request_token": preview.context["request_token"],
            "rate_per_second": "50", "pause_threshold": "0.5", **fields}


def test_the_patch_preview_shows_the_diff_sample_and_the_invalid_count_then_starts(django_user_model):
    valid, invalid = sales_letters(8, invalid=3)
    client = console_user(django_user_model, may_edit=True)
    fields = form(client, params_patch=PATCH_TEXT)

    checked = client.post(reverse("console:bulk-preview"), fields)
    page = checked.content.decode()
    assert checked.status_code == 200
    assert 'name="params_patch"' in page and "Check the patch" in page
    assert "It changes the params of 5 of the 8 tasks checked." in page
    assert "<strong>3 letters</strong> would fail their kind's validation" in page
    assert f'>#{invalid[0]}</a> <code class="mono">date_from</code> must be a date YYYY-MM-DD' in page
    assert '<td class="mono">&quot;2026-10-01&quot;</td>' in page and "&quot;2026-11-01&quot;" in page
    assert not BulkAction.objects.exists()

    started = client.post(reverse("console:bulk-start"), fields)
    bulk = BulkAction.objects.get()
    assert started["Location"] == reverse("console:bulk-detail", args=[bulk.public_id])
    assert bulk.params_patch == json.loads(PATCH_TEXT)
    assert "Params patch" in client.get(started["Location"]).content.decode()


def test_a_malformed_patch_shows_the_form_again_with_the_error(django_user_model):
    sales_letters(2, invalid=0)
    client = console_user(django_user_model, may_edit=True)

    response = client.post(reverse("console:bulk-start"), form(client, params_patch='["format"]'))

    assert response.status_code == 400
    assert "must be a JSON object" in response.context["errors"]["params_patch"]
    assert not BulkAction.objects.exists()


def test_without_the_edit_permission_no_patch_is_offered_or_taken(django_user_model):
    sales_letters(2, invalid=0)
    client = console_user(django_user_model, may_edit=False)
    fields = form(client)
    assert Permission.objects.filter(user__username="alice", codename="replay_deadletter").exists()
    assert 'name="params_patch"' not in client.post(reverse("console:bulk-preview"), fields).content.decode()

    for view in ("console:bulk-preview", "console:bulk-start"):
        assert client.post(reverse(view), {**fields, "params_patch": PATCH_TEXT}).status_code == 403
    assert not BulkAction.objects.exists()
