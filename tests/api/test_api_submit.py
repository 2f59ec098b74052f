"""POST /report/task/submit: created, idempotent repeats, and every way a body can be wrong."""

import json
import threading

import pytest
import requests

from reports.models import ReportTask, TaskStatus

pytestmark = pytest.mark.django_db

URL = "/report/task/submit"


def post(client, body, *, content_type="application/json", **headers):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return client.post(URL, data=data, content_type=content_type, headers=headers)


def test_submit_creates_a_pending_task_and_answers_201_with_its_uuid(token_client):
    response = post(token_client, {"kind": "probe", "params": {"fail_attempts": 1}, "priority": "high"})

    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"task_id"}
    task = ReportTask.objects.get(public_id=body["task_id"])
    assert (task.kind, task.priority, task.status) == ("probe", "high", TaskStatus.PENDING)
    assert task.params["fail_attempts"] == 1
    assert task.submitted_by == "token:test-client"
    assert response["Location"] == f"/report/task/{task.public_id}/status"


def test_priority_and_params_default_when_left_out(token_client):
    response = post(token_client, {"kind": "probe"})

    assert response.status_code == 201
    task = ReportTask.objects.get(public_id=response.json()["task_id"])
    assert task.priority == "default"
    assert task.params["fail_attempts"] == 0


@pytest.mark.parametrize("where", ["header", "field", "both"])
def test_same_idempotency_key_returns_the_same_task_with_200(token_client, where):
    body = {"kind": "probe", "params": {"sleep_seconds": 1}}
    headers = {}
    if where in ("header", "both"):
        headers["Idempotency-Key"] = "nightly-2026-11-21"
    if where in ("field", "both"):
        body["idempotency_key"] = "nightly-2026-11-21"

    first = post(token_client, body, **headers)
    second = post(token_client, body, **headers)

    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json() == second.json()
    assert ReportTask.objects.count() == 1


def test_reused_key_with_other_params_is_a_409_naming_the_key(token_client):
    post(token_client, {"kind": "probe", "idempotency_key": "k1"})

    response = post(token_client, {"kind": "probe", "params": {"sleep_seconds": 2}, "idempotency_key": "k1"})

    assert response.status_code == 409
    assert response.json()["field"] == "idempotency_key"
    assert ReportTask.objects.count() == 1


def test_header_and_field_keys_that_differ_are_a_409_conflict(token_client):
    response = post(token_client, {"kind": "probe", "idempotency_key": "a"}, **{"Idempotency-Key": "b"})

    assert response.status_code == 409
    assert response.json()["field"] == "idempotency_key"
    assert not ReportTask.objects.exists()


@pytest.mark.parametrize(
    "body, status, field",
    [
        ({"params": {}}, 422, "kind"),
        ({"kind": "no_such_kind"}, 422, "kind"),
        ({"kind": 5}, 422, "kind"),
        ({"kind": "probe", "params": []}, 422, "params"),
        ({"kind": "probe", "params": {"x": "y" * (65 * 1024)}}, 422, "params"),
        ({"kind": "probe", "priority": "urgent"}, 422, "priority"),
        ({"kind": "probe", "params": {"sleep_seconds": -1}}, 422, "sleep_seconds"),
        ({"kind": "probe", "params": {"unknown_param": 1}}, 422, "unknown_param"),
        ({"kind": "probe", "idempotency_key": "x" * 201}, 422, "idempotency_key"),
        ({"kind": "probe", "idempotency_key": 12}, 422, "idempotency_key"),
        ({"kind": "probe", "colour": "red"}, 400, "colour"),
    ],
)
def test_invalid_fields_are_named_and_nothing_is_written(token_client, body, status, field):
    response = post(token_client, body)

    assert response.status_code == status, response.content
    assert response.json()["field"] == field
    assert response.json()["error"]
    assert not ReportTask.objects.exists()


@pytest.mark.parametrize(
    "data, content_type, status",
    [
        (b'{"kind": "probe"', "application/json", 400),  # truncated JSON
        (b'{"kind": "pr\xffobe"}', "application/json", 400),  # invalid UTF-8
        (b'["probe"]', "application/json", 400),  # not an object
        (b'{"kind": "probe", "params": {"sleep_seconds": NaN}}', "application/json", 400),
        (b"", "application/json", 400),
        (b'{"kind": "probe"}', "text/plain", 415),
        (b"kind=probe", "application/x-www-form-urlencoded", 415),
        (b'{"kind": "probe"}', "application/json; charset=latin-1", 415),
    ],
)
def test_malformed_bodies_get_json_errors(token_client, data, content_type, status):
    response = post(token_client, data, content_type=content_type)

    assert response.status_code == status, response.content
    assert response.json()["field"] is None
    assert response.json()["error"]
    assert not ReportTask.objects.exists()


def test_a_body_over_the_cap_is_413(token_client, settings):
    settings.API_MAX_BODY_BYTES = 2048
    response = post(token_client, {"kind": "probe", "params": {"pad": "x" * 4096}})

    assert response.status_code == 413
    assert response.json() == {"error": response.json()["error"], "field": None}
    assert not ReportTask.objects.exists()


def test_charset_utf8_is_accepted(token_client):
    response = post(token_client, {"kind": "probe"}, content_type="application/json; charset=utf-8")

    assert response.status_code == 201


def test_other_methods_are_405_with_allow(token_client):
    response = token_client.get(URL)

    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert response.json()["field"] is None


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_submits_with_one_key_make_one_task(live_server, api_token):
    """Real HTTP, real threads in the live server: the unique key decides, not luck."""
    barrier = threading.Barrier(20)
    results: list[tuple[int, dict]] = []
    lock = threading.Lock()

    def submit():
        barrier.wait()
        response = requests.post(
            f"{live_server.url}/report/task/submit",
            json={"kind": "probe", "params": {"sleep_seconds": 0}},
            headers={"Authorization": f"Bearer {api_token}", "Idempotency-Key": "one-key"},
            timeout=60,
        )
        with lock:
            results.append((response.status_code, response.json()))

    threads = [threading.Thread(target=submit) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)

    statuses = sorted(status for status, _ in results)
    assert statuses == [200] * 19 + [201], results
    assert len({body["task_id"] for _, body in results}) == 1
    [task] = ReportTask.objects.all()
    assert str(task.public_id) == results[0][1]["task_id"]
    assert task.idempotency_key == "one-key"


def test_every_bad_field_is_listed_and_the_first_keeps_the_old_keys(token_client):
    response = post(token_client, {
        "kind": "sales_summary",
        "params": {"format": "pdf", "group_by": "planet", "colour": 1},
        "priority": "urgent",
    })

    assert response.status_code == 422, response.content
    body = response.json()
    fields = [entry["field"] for entry in body["errors"]]
    assert set(fields) == {"format", "group_by", "colour", "priority"}
    assert all(entry["error"] for entry in body["errors"])
    assert (body["field"], body["error"]) == (body["errors"][0]["field"], body["errors"][0]["error"])
    assert not ReportTask.objects.exists()

    # One bad field: the same list of one.
    single = post(token_client, {"kind": "probe", "priority": "urgent"}).json()
    assert single["errors"] == [{"field": "priority", "error": single["error"]}]
    # Not a validation error: no list.
    assert "errors" not in post(token_client, {"kind": "probe", "colour": "red"}).json()
