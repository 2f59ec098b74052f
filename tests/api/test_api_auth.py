"""Who may call the API: bearer tokens (missing, wrong, revoked) and console sessions with CSRF."""

import hashlib
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from reports.models import ApiToken, ReportTask
from reports.services.tokens import authenticate_token, create_api_token, revoke_api_token
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db

SUBMIT = "/report/task/submit"


def submit(client, **headers):
    return client.post(SUBMIT, data={"kind": "probe"}, content_type="application/json", headers=headers)


def status_url(task):
    return f"/report/task/{task.public_id}/status"


def test_no_credentials_is_401_with_a_bearer_challenge(client):
    task = make_task()

    for response in (submit(client), client.get(status_url(task)), client.get("/report/task/dead-letters")):
        assert response.status_code == 401
        assert response.json()["field"] is None
        assert response["WWW-Authenticate"].startswith("Bearer")
    assert ReportTask.objects.count() == 1


@pytest.mark.parametrize(
    "header", ["Bearer rpt_wrong", "Bearer ", "Basic dXNlcjpwYXNz", "rpt_no_scheme", "Bearer " + "x" * 300]
)
def test_wrong_or_malformed_tokens_are_401(client, api_token, header):
    response = submit(client, Authorization=header)

    assert response.status_code == 401
    assert response.json()["error"]
    assert not ReportTask.objects.exists()


def test_revoked_token_is_401(client, api_token):
    assert revoke_api_token(name="test-client")

    response = submit(client, Authorization=f"Bearer {api_token}")

    assert response.status_code == 401
    assert "revoked" in response.json()["error"]


def test_a_bad_token_is_401_even_with_a_valid_session(client, django_user_model):
    user = django_user_model.objects.create_user("ops", password="pw-123456789", is_staff=True)
    client.force_login(user)

    response = submit(client, Authorization="Bearer rpt_wrong")

    assert response.status_code == 401


def test_token_is_stored_hashed_and_prefix_kept(api_token):
    token = ApiToken.objects.get(name="test-client")

    assert api_token.startswith("rpt_") and len(api_token) > 40
    assert token.token_hash == hashlib.sha256(api_token.encode()).hexdigest()
    assert token.prefix == api_token[:12]
    assert api_token not in {token.token_hash, token.prefix, token.name}


def test_last_used_at_is_written_at_most_once_a_minute(api_token):
    first = authenticate_token(api_token)
    stamp = ApiToken.objects.get(pk=first.pk).last_used_at
    authenticate_token(api_token)
    assert ApiToken.objects.get(pk=first.pk).last_used_at == stamp

    ApiToken.objects.filter(pk=first.pk).update(last_used_at=timezone.now() - timedelta(seconds=61))
    authenticate_token(api_token)
    assert ApiToken.objects.get(pk=first.pk).last_used_at > stamp


def test_create_api_token_command_prints_the_token_once_and_it_works(client, capsys):
    call_command("create_api_token", "billing-service")
    printed = capsys.readouterr().out.strip()

    assert printed.startswith("rpt_")
    assert (
        ApiToken.objects.get(name="billing-service").token_hash
        == hashlib.sha256(printed.encode()).hexdigest()
    )
    sales = {"kind": "sales_summary"}
    response = client.post(SUBMIT, data=sales, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {printed}")
    assert response.status_code == 201

    with pytest.raises(CommandError, match="already exists"):
        call_command("create_api_token", "billing-service")


def test_create_api_token_needs_a_name():
    with pytest.raises(CommandError):
        call_command("create_api_token")


def test_token_names_are_unique():
    create_api_token(name="one")
    with pytest.raises(Exception, match="already exists"):
        create_api_token(name="one")


# --- console sessions ------------------------------------------------------------


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("staff", password="pw-123456789", is_staff=True)


def grant(user, *codenames):
    for codename in codenames:
        app, name = codename.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app, codename=name))
    # Permissions are cached on the instance; a fresh one sees the grant.
    return type(user).objects.get(pk=user.pk)


def csrf_client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def csrf_token(client) -> str:
    client.get("/console/login/")  # any page with a form sets the CSRF cookie
    return client.cookies["csrftoken"].value


def test_session_post_without_csrf_token_is_403_and_writes_nothing(staff):
    client = csrf_client(staff)

    response = submit(client)

    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]
    assert not ReportTask.objects.exists()


def test_session_post_with_csrf_token_is_accepted(staff):
    client = csrf_client(grant(staff, "reports.add_reporttask", "reports.submit_operator_kinds"))
    token = csrf_token(client)

    response = submit(client, **{"X-CSRFToken": token})

    assert response.status_code == 201
    assert ReportTask.objects.get().submitted_by == "staff"


def test_a_session_submit_needs_the_add_permission_and_the_probe_its_own(staff):
    """A staff account with no permissions submits nothing, and the operator's canary needs what
    the `operator` scope is to a token."""
    client = csrf_client(staff)
    headers = {"X-CSRFToken": csrf_token(client)}
    sales = {"kind": "sales_summary"}

    for path, body in ((SUBMIT, sales), ("/report/batch/submit", {"items": [sales]})):
        denied = client.post(path, data=body, content_type="application/json", headers=headers)
        assert denied.status_code == 403
        assert "reports.add_reporttask" in denied.json()["error"]

    client = csrf_client(grant(staff, "reports.add_reporttask"))
    headers = {"X-CSRFToken": csrf_token(client)}
    probe = submit(client, **headers)
    assert (probe.status_code, probe.json()["field"]) == (403, "kind")
    assert "reports.submit_operator_kinds" in probe.json()["error"]
    in_batch = client.post("/report/batch/submit", data={"items": [sales, {"kind": "probe"}]},
                           content_type="application/json", headers=headers)
    assert (in_batch.status_code, in_batch.json()["field"]) == (403, "kind")
    assert not ReportTask.objects.exists()
    answer = client.post(SUBMIT, data=sales, content_type="application/json", headers=headers)
    assert answer.status_code == 201


def test_bearer_post_needs_no_csrf_token(api_token):
    client = Client(enforce_csrf_checks=True)

    response = submit(client, Authorization=f"Bearer {api_token}")

    assert response.status_code == 201


def test_non_staff_session_is_403(django_user_model):
    user = django_user_model.objects.create_user("someone", password="pw-123456789")
    client = Client()
    client.force_login(user)

    assert submit(client).status_code == 403


def test_session_reads_need_view_permission(staff):
    task = make_task()
    client = Client()
    client.force_login(staff)

    denied = client.get(status_url(task))
    assert denied.status_code == 403
    assert "reports.view_reporttask" in denied.json()["error"]

    client.force_login(grant(staff, "reports.view_reporttask"))
    assert client.get(status_url(task)).status_code == 200


def test_session_dead_letter_list_needs_view_deadletter(staff):
    client = Client()
    client.force_login(staff)
    assert client.get("/report/task/dead-letters").status_code == 403

    client.force_login(grant(staff, "deadletters.view_deadletter"))
    assert client.get("/report/task/dead-letters").status_code == 200


def test_session_replay_needs_replay_permission(staff):
    letter = make_dead_letter()
    client = csrf_client(staff)
    url = f"/report/task/{letter.task.public_id}/replay"

    denied = client.post(url, content_type="application/json", headers={"X-CSRFToken": csrf_token(client)})
    assert denied.status_code == 403
    assert "deadletters.replay_deadletter" in denied.json()["error"]
    letter.task.refresh_from_db()
    assert letter.task.status == "dead"

    client = csrf_client(grant(staff, "deadletters.replay_deadletter"))
    allowed = client.post(url, content_type="application/json", headers={"X-CSRFToken": csrf_token(client)})
    assert allowed.status_code == 200
    assert allowed.json() == {"ok": True}


def test_session_form_post_is_415_not_a_crash(staff):
    client = csrf_client(grant(staff, "reports.add_reporttask"))

    response = client.post(SUBMIT, data={"kind": "probe"}, headers={"X-CSRFToken": csrf_token(client)})

    assert response.status_code == 415
    assert not ReportTask.objects.exists()
