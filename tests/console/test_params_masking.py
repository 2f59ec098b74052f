"""Who sees params and tracebacks in the console: without `deadletters.view_params` every page and
partial shows the keys with masked values and hides tracebacks; with it they show, except a kind's
sensitive keys, masked for everyone. Edit-and-replay keeps a masked value as it was stored."""

import html

import pytest
from django.contrib.auth import get_user_model

from deadletters.models import AuditEntry, BulkAction
from reports.kinds.masking import MASK
from reports.models import ReportBatch, ReportTask
from tests.conftest import operators_group
from tests.secret_kind import API_KEY, CUSTOMER, PARAMS, make_secret_letter, secret_kind  # noqa: F401

pytestmark = pytest.mark.django_db

# (name, url, htmx partial)
PAGES = [
    ("dashboard", "/console/", False),
    ("list", "/console/dead-letters/?status=all", False),
    ("list-rows", "/console/dead-letters/?status=all", True),
    ("groups", "/console/dead-letters/groups/?status=all", False),
    ("groups-rows", "/console/dead-letters/groups/?status=all", True),
    ("detail", "/console/dead-letters/{letter}/", False),
    ("replay-confirm", "/console/dead-letters/{letter}/replay/", False),
    ("replay-edit", "/console/dead-letters/{letter}/replay/edit/", False),
    ("replay-later", "/console/dead-letters/{letter}/replay/later/", False),
    ("tasks", "/console/tasks/", False),
    ("task-rows", "/console/tasks/", True),
    ("task", "/console/tasks/{task}/", False),
    ("task-state", "/console/tasks/{task}/state/", True),
    ("audit", "/console/audit/", False),
    ("audit-rows", "/console/audit/", True),
    ("batches", "/console/batches/", False),
    ("batch", "/console/batches/{batch}/", False),
    ("bulk-preview", "/console/bulk/preview/?action=replay&status=all&kind=secret_test", False),
    ("bulk-list", "/console/bulk/", False),
    ("bulk", "/console/bulk/{bulk}/", False),
    ("running", "/console/running/", False),
    ("retrying", "/console/retrying/", False),
    ("kind", "/console/kinds/secret_test/", False),
]
SHOW_PARAMS = {"detail", "replay-confirm", "replay-edit", "task", "audit", "audit-rows"}
SHOW_TRACEBACK = {"detail", "task", "task-state"}


@pytest.fixture
def site(secret_kind):  # noqa: F811
    batch = ReportBatch.objects.create(name="month-end", total=1)
    letter = make_secret_letter()
    ReportTask.objects.filter(pk=letter.task_id).update(batch=batch)
    edited = {**PARAMS, "customer": f"{CUSTOMER}-B", "api_key": f"{API_KEY}-B"}
    AuditEntry.objects.create(actor="ops", action="replay", dead_letter=letter, task=letter.task,
                              details={"params_diff": {"before": PARAMS, "after": edited}})
    bulk = BulkAction.objects.create(action="replay", status="completed", selected_ids=[letter.pk])
    ids = {"letter": letter.pk, "task": letter.task.public_id, "batch": batch.public_id,
           "bulk": bulk.public_id}
    return {name: (url.format(**ids), partial) for name, url, partial in PAGES}


def _user(name: str, *, sees_params: bool):
    user = get_user_model().objects.create_user(name, is_staff=True)  # no password: nothing to hash
    perms = operators_group().permissions.all()
    user.user_permissions.set(perms if sees_params else perms.exclude(codename="view_params"))
    return user


def _get(client, user, url: str, partial: bool) -> str:
    client.force_login(user)
    response = client.get(url, **({"HTTP_HX_REQUEST": "true"} if partial else {}))
    assert response.status_code in (200, 286), url  # 286: htmx stops polling a finished task
    return html.unescape(response.content.decode())


@pytest.mark.parametrize("name", [p[0] for p in PAGES])
def test_params_and_tracebacks_show_only_with_the_permission(client, site, name):
    body = _get(client, _user("viewer", sees_params=False), *site[name])
    assert CUSTOMER not in body and API_KEY not in body
    if name in SHOW_PARAMS:
        assert f'"customer": "{MASK}"' in body and f'"api_key": "{MASK}"' in body
    if name in SHOW_TRACEBACK:
        assert "Traceback hidden" in body

    body = _get(client, _user("trusted", sees_params=True), *site[name])
    assert API_KEY not in body  # sensitive: masked for everyone
    if name in SHOW_PARAMS:
        assert f'"customer": "{CUSTOMER}"' in body and f'"api_key": "{MASK}"' in body
    if name in SHOW_TRACEBACK:
        assert f"fetch('{CUSTOMER}')" in body and "Traceback hidden" not in body


def test_raw_traceback_needs_the_permission(client, site):
    url = site["detail"][0] + "traceback.txt"
    client.force_login(_user("viewer", sees_params=False))
    assert client.get(url).status_code == 403
    assert client.get(url + "?download=1").status_code == 403
    client.force_login(_user("trusted", sees_params=True))
    assert CUSTOMER in client.get(url + "?download=1").content.decode()


def test_params_search_is_ignored_without_the_permission(client, site):
    body = _get(client, _user("viewer", sees_params=False), "/console/tasks/?params=ACME", False)
    assert "filter ignored" in body
    body = _get(client, _user("trusted", sees_params=True), "/console/tasks/?params=ACME", False)
    assert "filter ignored" not in body and "secret_test" in body


def test_edit_and_replay_keeps_a_masked_value_as_stored(client, site):
    """The fields post the mask back for the sensitive key: the task runs with the stored key."""
    client.force_login(_user("trusted", sees_params=True))
    response = client.post(site["replay-edit"][0], {
        "mode": "fields", "reason": "new customer", "param-customer": "NEW-CUSTOMER",
        "param-api_key": MASK, "param-rows": "25", "param-draft": ["false", "true"],
    })
    assert response.status_code == 302, response.content.decode()[:2000]
    task = ReportTask.objects.get(kind="secret_test")
    assert task.params == {**PARAMS, "customer": "NEW-CUSTOMER"}


def test_edit_and_replay_without_the_permission_changes_only_what_was_typed(client, site):
    client.force_login(_user("viewer", sees_params=False))
    response = client.post(site["replay-edit"][0], {
        "reason": "more rows", "params": f'{{"customer": "{MASK}", "api_key": "{MASK}", "rows": 50, '
                                         f'"draft": "{MASK}"}}',
    })
    assert response.status_code == 302, response.content.decode()[:2000]
    assert ReportTask.objects.get(kind="secret_test").params == {**PARAMS, "rows": 50}
