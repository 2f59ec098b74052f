"""A bulk replay with a params patch through the API: the dry run's diff sample and invalid count,
the run that keeps the patch, a patch that is not an object, and the edit permission a session needs."""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from deadletters.models import BulkAction
from tests.api.test_bulk import post, session
from tests.deadletters.bulk.test_patch import PATCH, sales_letters

pytestmark = pytest.mark.django_db

REPLAY = ("deadletters.replay_deadletter", "deadletters.view_bulkaction")
FILTER = {"kind": "sales_summary"}


def test_a_session_without_the_edit_permission_cannot_patch_even_in_a_dry_run(django_user_model):
    sales_letters(3, invalid=0)
    client = session(django_user_model, *REPLAY)

    for dry_run in (True, False):
        body = {"action": "replay", "filter": FILTER, "dry_run": dry_run, "params_patch": PATCH}
        denied = post(client, "/report/bulk/start", body)
        assert denied.status_code == 403, denied.content
        assert "deadletters.replay_edited_deadletter" in denied.json()["error"]
    assert not BulkAction.objects.exists()
    # Without a patch this user replays as before.
    assert post(client, "/report/bulk/start", {"action": "replay", "dry_run": True}).json()["count"] == 3


def test_the_dry_run_shows_the_patchs_sample_and_invalid_count_and_the_run_keeps_it(django_user_model):
    valid, invalid = sales_letters(12, invalid=2)
    body = {"action": "replay", "filter": FILTER, "reason": "moved", "params_patch": PATCH}
    client = session(django_user_model, *REPLAY, "deadletters.replay_edited_deadletter")
    sample = post(client, "/report/bulk/start", {**body, "dry_run": True}).json()["params_patch"]["sample"]
    assert set(sample[0]["after"].values()) == {"•••"}  # without deadletters.view_params
    django_user_model.objects.get(username="replayer").user_permissions.add(
        Permission.objects.get(content_type__app_label="deadletters", codename="view_params"))

    dry = post(client, "/report/bulk/start", {**body, "dry_run": True}).json()
    assert dry["count"] == 12
    patch = dry["params_patch"]
    assert (patch["checked"], patch["changed"], patch["invalid"]) == (12, 10, 2)
    assert [r["dead_letter"] for r in patch["refusals"]] == invalid
    assert patch["sample"][0] == {
        "dead_letter": valid[0], "kind": "sales_summary",
        "before": {"format": "csv", "date_from": "2026-10-01", "date_to": "2026-10-30"},
        "after": {"format": "xlsx", "date_from": "2026-11-01", "date_to": "2026-11-30"},
    }
    assert not BulkAction.objects.exists()

    started = post(client, "/report/bulk/start", body)
    assert started.status_code == 202, started.content
    assert started.json()["params_patch"] == PATCH and started.json()["refused"] == 0
    assert BulkAction.objects.get().params_patch == PATCH


def test_a_patch_that_is_not_a_patch_object_is_a_422_naming_the_field(django_user_model):
    sales_letters(2, invalid=0)
    client = session(django_user_model, *REPLAY, "deadletters.replay_edited_deadletter")

    for patch in ("set format=xlsx", None, [{"set": {}}], {"set": {"format": "x"}, "y": 1}, {"set": {}}):
        for dry_run in (True, False):
            body = {"action": "replay", "dry_run": dry_run, "params_patch": patch}
            refused = post(client, "/report/bulk/start", body)
            assert refused.status_code == 422, (patch, refused.content)
            assert refused.json()["field"] == "params_patch"
    assert not BulkAction.objects.exists()


def test_a_runs_patch_shows_its_values_only_to_whoever_may_see_params(django_user_model):
    """The patch's values are param values: masked without deadletters.view_params, on the run's
    answer, its page and its audit entry, as the dry run's sample is."""
    sales_letters(2, invalid=0)
    replayer = session(django_user_model, *REPLAY, "deadletters.replay_edited_deadletter",
                       "deadletters.view_auditentry")
    started = post(replayer, "/report/bulk/start", {"action": "replay", "filter": FILTER, "reason": "moved",
                                                      "params_patch": PATCH})
    assert started.status_code == 202, started.content
    masked = {"set": {"format": "•••"}, "replace": {"*": {"from": "•••", "to": "•••"}}}
    assert started.json()["params_patch"] == masked
    bulk = BulkAction.objects.get()
    assert replayer.get(f"/report/bulk/{bulk.public_id}/status").json()["params_patch"] == masked
    page = replayer.get(reverse("console:bulk-detail", args=[bulk.public_id])).content.decode()
    assert "xlsx" not in page and "•••" in page
    audit = replayer.get(reverse("console:audit")).content.decode()
    assert "bulk_replay" in audit and "xlsx" not in audit

    django_user_model.objects.get(username="replayer").user_permissions.add(
        Permission.objects.get(content_type__app_label="deadletters", codename="view_params"))
    assert replayer.get(f"/report/bulk/{bulk.public_id}/status").json()["params_patch"] == PATCH
    assert "xlsx" in replayer.get(reverse("console:bulk-detail", args=[bulk.public_id])).content.decode()
    assert "xlsx" in replayer.get(reverse("console:audit")).content.decode()
