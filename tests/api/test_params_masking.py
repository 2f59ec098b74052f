"""Who sees params through the API: a client its own tasks' always (it sent them); an operator token
everyone's only with the `params` scope, a session only with `deadletters.view_params`. No
representation carries a param value to a client that may not see it."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from api.auth import ApiClient
from deadletters.models import BulkAction
from reports.models import ReportBatch, ReportTask
from reports.services.tokens import create_api_token
from tests.secret_kind import API_KEY, CUSTOMER, make_secret_letter, secret_kind  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("scopes", "sees"),
    [(["submit", "read"], True), (["read", "operator"], False), (["read", "operator", "params"], True)],
)
def test_a_token_sees_its_own_params_and_others_only_with_the_params_scope(scopes, sees):
    token, _ = create_api_token(name="t", scopes=scopes)
    assert ApiClient(kind="token", name="t", token=token).can_see_params is sees


def test_a_session_sees_params_with_the_permission():
    user = get_user_model().objects.create_user("staff", is_staff=True)
    assert ApiClient(kind="session", name="staff", user=user).can_see_params is False
    user.user_permissions.add(Permission.objects.get(codename="view_params"))
    user = get_user_model().objects.get(pk=user.pk)  # a fresh permission cache
    assert ApiClient(kind="session", name="staff", user=user).can_see_params is True


@pytest.fixture
def operator_without_params(client, secret_kind):  # noqa: F811
    raw = create_api_token(name="ops", scopes=["read", "replay", "operator"])[1]
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {raw}"
    letter = make_secret_letter()
    batch = ReportBatch.objects.create(name="b", total=1)
    ReportTask.objects.filter(pk=letter.task_id).update(batch=batch)
    bulk = BulkAction.objects.create(action="replay", status="completed", selected_ids=[letter.pk])
    return {"task": letter.task.public_id, "batch": batch.public_id, "bulk": bulk.public_id}


@pytest.mark.parametrize("url", [
    "/report/task/dead-letters", "/report/dead-letters/groups", "/report/task/{task}/status",
    "/report/batch/{batch}/status", "/report/bulk/{bulk}/status", "/report/alerts/snoozes",
])
def test_no_api_representation_carries_a_param_value(client, operator_without_params, url):
    response = client.get(url.format(**operator_without_params))
    assert response.status_code == 200
    assert CUSTOMER not in response.content.decode() and API_KEY not in response.content.decode()
