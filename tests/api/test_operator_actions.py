"""The console's operator actions through the API: audited as the console's are, and refused to
a client's token."""

import json

import pytest
from django.test import Client

from deadletters.models import AuditEntry, DeadLetter, DeadLetterStatus
from reports.models import PausedKind, ReportTask, TaskStatus
from reports.services.tokens import create_api_token
from tests.factories import make_dead_letter

pytestmark = pytest.mark.django_db


def client_for(*scopes):
    raw = create_api_token(name="-".join(scopes), scopes=scopes)[1]
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def post(client, path, body=None):
    return client.post(path, data=json.dumps(body or {}), content_type="application/json")


def test_archive_discard_and_restore_are_audited_with_the_api_as_source():
    operator = client_for("read", "replay", "operator")
    letter = make_dead_letter()

    assert (
        post(operator, f"/report/dead-letter/{letter.pk}/archive", {"reason": "known"}).json()["status"]
        == "archived"
    )
    assert post(operator, f"/report/dead-letter/{letter.pk}/restore").json()["status"] == "open"
    assert post(operator, f"/report/dead-letter/{letter.pk}/discard").json()["status"] == "discarded"

    assert DeadLetter.objects.get(pk=letter.pk).status == DeadLetterStatus.DISCARDED
    entries = list(AuditEntry.objects.order_by("id").values_list("action", "source", "actor"))
    assert entries == [(a, "api", "token:read-replay-operator") for a in ("archive", "restore", "discard")]


def test_a_client_token_cannot_act_as_an_operator():
    client = client_for("submit", "read", "replay")
    letter = make_dead_letter()
    assert post(client, f"/report/dead-letter/{letter.pk}/archive").status_code == 403
    assert post(client, f"/report/dead-letter/{letter.pk}/replay").status_code == 403
    assert post(client, "/report/kind/probe/pause").status_code == 403
    assert (
        DeadLetter.objects.get(pk=letter.pk).status == DeadLetterStatus.OPEN
        and not PausedKind.objects.exists()
    )


def test_edited_replay_and_kind_pause_resume(django_user_model, django_capture_on_commit_callbacks):
    operator = client_for("read", "replay", "operator")
    letter = make_dead_letter(task=None)
    ReportTask.objects.filter(pk=letter.task_id).update(kind="sales_summary", params={"format": "csv"})
    with django_capture_on_commit_callbacks(execute=True):
        response = post(operator, f"/report/dead-letter/{letter.pk}/replay", {"params": {"format": "xlsx"}})
    assert response.status_code == 200, response.content
    task = ReportTask.objects.get(pk=letter.task_id)
    assert (task.status, task.params["format"]) == (TaskStatus.PENDING, "xlsx")

    assert post(operator, "/report/kind/probe/pause", {"reason": "upstream down"}).json()["changed"] is True
    assert post(operator, "/report/kind/probe/pause").json()["changed"] is False
    assert post(operator, "/report/kind/probe/resume").json()["paused"] is False
    assert post(operator, "/report/kind/probe/resume").status_code == 409
    assert post(operator, "/report/kind/nope/pause").status_code == 404


def test_replaying_with_another_kinds_params_is_a_conflict_and_with_nobodys_params_invalid():
    """The document allows any kind's params (it cannot know the letter's kind): those of another kind
    conflict with the letter's task (409, as declared); params no kind takes are invalid (422)."""
    operator = client_for("read", "replay", "operator")
    letter = make_dead_letter(task=None)
    ReportTask.objects.filter(pk=letter.task_id).update(kind="probe", params={})
    url = f"/report/dead-letter/{letter.pk}/replay"

    other = post(operator, url, {"params": {"group_by": "month"}})
    nobodys = post(operator, url, {"params": {"group_by": "weekday"}})

    assert (other.status_code, other.json()["field"]) == (409, "params")
    assert "sales_summary" in other.json()["error"]
    assert (nobodys.status_code, nobodys.json()["field"]) == (422, "group_by")
    assert post(operator, url, {"params": None}).json()["field"] == "params"
    assert ReportTask.objects.get(pk=letter.task_id).status == TaskStatus.DEAD


def test_a_bulk_start_with_a_rate_that_is_no_number_is_refused():
    operator = client_for("read", "replay", "operator")
    for rate in (None, "5", True):
        response = post(operator, "/report/bulk/start", {"action": "archive", "rate_per_second": rate})
        assert (response.status_code, response.json()["field"]) == (422, "rate_per_second")
    response = post(operator, "/report/bulk/start", {"action": "archive", "rate_per_second": 3})
    assert response.status_code == 202 and response.json()["rate_per_second"] == 3.0
