"""API clients are kept apart: a token sees, downloads and replays only its own tasks, batches and
dead letters (another client's answer 404), idempotency keys are per client, and scopes decide
what a token may call (issue 11, part B)."""

import json

import pytest
from django.db import IntegrityError, transaction
from django.test import Client

from reports.models import ReportBatch, ReportTask, TaskStatus
from reports.services import submit_task
from reports.services.tokens import create_api_token
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db

SALES = {"kind": "sales_summary", "params": {"format": "csv"}}


def client_for(name, *scopes):
    token, raw = create_api_token(name=name, scopes=scopes or ("submit", "read", "replay"))
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    client.token = token
    return client


def post(client, path, body=None, **headers):
    return client.post(path, data=json.dumps(body or {}), content_type="application/json", headers=headers)


@pytest.fixture
def alice():
    return client_for("alice")


@pytest.fixture
def bob():
    return client_for("bob")


def test_another_clients_task_is_404_for_status_output_and_replay(alice, bob, media_root):
    media_root.mkdir(parents=True, exist_ok=True)
    (media_root / "a.csv").write_text("a\n1\n")
    done = make_task(status=TaskStatus.DONE, attempt=1, output_file="a.csv", owner=alice.token)
    dead = make_dead_letter(task=make_task(status=TaskStatus.DEAD, attempt=3, owner=alice.token)).task

    for response in (
        bob.get(f"/report/task/{done.public_id}/status"),
        bob.get(f"/report/task/{done.public_id}/output"),
        post(bob, f"/report/task/{dead.public_id}/replay"),
    ):
        assert response.status_code == 404
        assert response.json() == {"error": "no such task", "field": None}
    assert ReportTask.objects.get(pk=dead.pk).status == TaskStatus.DEAD

    assert alice.get(f"/report/task/{done.public_id}/status").json()["status"] == "done"
    assert alice.get(f"/report/task/{done.public_id}/output").status_code == 200
    assert post(alice, f"/report/task/{dead.public_id}/replay").json() == {"ok": True}


def test_a_submitted_task_belongs_to_its_client(alice, bob):
    task_id = post(alice, "/report/task/submit", SALES).json()["task_id"]

    assert ReportTask.objects.get(public_id=task_id).owner == alice.token
    assert alice.get(f"/report/task/{task_id}/status").status_code == 200
    assert bob.get(f"/report/task/{task_id}/status").status_code == 404


def test_the_dead_letter_list_shows_only_the_clients_own_letters(alice, bob):
    mine = make_dead_letter(task=make_task(status=TaskStatus.DEAD, attempt=3, owner=alice.token))
    make_dead_letter(
        task=make_task(status=TaskStatus.DEAD, attempt=3, owner=bob.token), error_message="bob's secret"
    )
    make_dead_letter(error_message="an operator's probe")
    operator = client_for("ops", "read", "operator")

    listed = alice.get("/report/task/dead-letters").json()["results"]
    assert [row["id"] for row in listed] == [mine.pk]
    assert len(operator.get("/report/task/dead-letters").json()["results"]) == 3


def test_an_operator_token_reads_and_replays_every_clients_tasks(alice):
    dead = make_dead_letter(task=make_task(status=TaskStatus.DEAD, attempt=3, owner=alice.token)).task
    operator = client_for("ops", "read", "replay", "operator")

    assert operator.get(f"/report/task/{dead.public_id}/status").json()["status"] == "dead"
    assert post(operator, f"/report/task/{dead.public_id}/replay").json() == {"ok": True}


def test_another_clients_batch_is_404(alice, bob):
    batch_id = post(alice, "/report/batch/submit", {"items": [SALES, SALES]}).json()["batch_id"]

    batch = ReportBatch.objects.get(public_id=batch_id)
    assert batch.owner == alice.token
    assert set(batch.tasks.values_list("owner", flat=True)) == {alice.token.pk}
    assert alice.get(f"/report/batch/{batch_id}/status").json()["total"] == 2
    assert bob.get(f"/report/batch/{batch_id}/status").status_code == 404


# --- idempotency keys are per client ------------------------------------------------------


def test_the_same_idempotency_key_from_two_clients_makes_two_tasks(alice, bob):
    first = post(alice, "/report/task/submit", SALES, **{"Idempotency-Key": "nightly"})
    squat = post(bob, "/report/task/submit", {**SALES, "params": {"format": "xlsx"}},
                 **{"Idempotency-Key": "nightly"})
    again = post(alice, "/report/task/submit", SALES, **{"Idempotency-Key": "nightly"})

    assert (first.status_code, squat.status_code, again.status_code) == (201, 201, 200)
    assert again.json() == first.json() != squat.json()
    assert "was already used" not in squat.content.decode()


def test_the_same_batch_key_from_two_clients_makes_two_batches(alice, bob):
    body = {"items": [SALES], "idempotency_key": "b-1"}

    first, other = post(alice, "/report/batch/submit", body), post(bob, "/report/batch/submit", body)

    assert (first.status_code, other.status_code) == (201, 201)
    assert first.json()["batch_id"] != other.json()["batch_id"]


def test_owner_less_keys_stay_unique_among_themselves():
    first = submit_task(kind="sales_summary", params={}, idempotency_key="console-1")
    again = submit_task(kind="sales_summary", params={}, idempotency_key="console-1")

    assert (first.created, again.created, again.task.pk) == (True, False, first.task.pk)
    with pytest.raises(IntegrityError), transaction.atomic():
        make_task(idempotency_key="console-1")
    with pytest.raises(IntegrityError), transaction.atomic():
        ReportBatch.objects.bulk_create([ReportBatch(idempotency_key="k"), ReportBatch(idempotency_key="k")])


def test_a_clients_keys_are_unique_for_that_client(alice):
    make_task(idempotency_key="k", owner=alice.token)

    with pytest.raises(IntegrityError), transaction.atomic():
        make_task(idempotency_key="k", owner=alice.token)
    make_task(idempotency_key="k")  # an operator's key of the same text is another key


# --- scopes ---------------------------------------------------------------------------------


def test_each_endpoint_needs_its_scope():
    task = make_dead_letter().task
    reader = client_for("reader", "read", "operator")
    submitter = client_for("submitter", "submit")

    refused = [
        post(reader, "/report/task/submit", SALES),
        post(reader, "/report/batch/submit", {"items": [SALES]}),
        post(reader, f"/report/task/{task.public_id}/replay"),
        submitter.get(f"/report/task/{task.public_id}/status"),
        submitter.get(f"/report/task/{task.public_id}/output"),
        submitter.get("/report/task/dead-letters"),
    ]

    assert [r.status_code for r in refused] == [403] * 6
    assert refused[0].json()["error"] == "this API token lacks the scope 'submit'"
    assert refused[2].json()["error"] == "this API token lacks the scope 'replay'"
    assert ReportTask.objects.count() == 1 and not ReportBatch.objects.exists()


def test_the_probe_needs_the_operator_scope_single_and_in_a_batch(alice):
    probe = {"kind": "probe", "params": {"sleep_seconds": 600}}

    single = post(alice, "/report/task/submit", probe)
    batch = post(alice, "/report/batch/submit", {"items": [SALES, probe]})

    assert (single.status_code, single.json()["field"]) == (403, "kind")
    assert (batch.status_code, batch.json()["field"]) == (403, "kind")
    assert not ReportTask.objects.exists()
    operator = client_for("ops", "submit", "operator")
    assert post(operator, "/report/task/submit", probe).status_code == 201


def test_a_session_keeps_its_permission_based_access(alice, django_user_model):
    from django.contrib.auth.models import Permission

    task = make_task(owner=alice.token)
    staff = django_user_model.objects.create_user("ops", password="pw-123456789", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_reporttask"))
    session = Client()
    session.force_login(staff)

    assert session.get(f"/report/task/{task.public_id}/status").status_code == 200
