"""Status, replay, output and the dead-letter list, as a script calling the API sees them."""

import ipaddress
import threading
from datetime import timedelta

import pytest
import requests
from django.utils import timezone

from deadletters.models import AuditEntry, DeadLetter, DeadLetterStatus
from deadletters.services.replay import replay_task
from reports.models import ReportTask, TaskStatus
from reports.services.enqueue import job_id_for
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db


# --- status -----------------------------------------------------------------------


def test_status_of_a_pending_task(token_client):
    task = make_task(priority="low")

    response = token_client.get(f"/report/task/{task.public_id}/status")

    assert response.status_code == 200
    assert response["Cache-Control"].startswith("max-age=0")
    body = response.json()
    assert body["id"] == str(task.public_id)
    assert body["status"] == "pending" and body["priority"] == "low" and body["kind"] == "probe"
    assert (body["attempt"], body["max_attempts"]) == (0, 3)
    assert body["last_error"] is None and body["output_path"] is None and body["download_url"] is None
    assert body["created_at"] == task.created_at.isoformat()
    assert body["started_at"] is None and body["finished_at"] is None


def test_status_of_a_done_task_has_output_and_download_url(token_client):
    now = timezone.now()
    task = make_task(
        status=TaskStatus.DONE, attempt=2, output_file="probe/x/report.csv", started_at=now, finished_at=now
    )

    body = token_client.get(f"/report/task/{task.public_id}/status").json()

    assert body["status"] == "done" and body["attempt"] == 2
    assert body["output_path"] == "probe/x/report.csv"
    assert body["download_url"] == f"http://testserver/report/task/{task.public_id}/output"
    assert body["started_at"] == now.isoformat() and body["finished_at"] == now.isoformat()


def test_status_of_a_dead_task_shows_the_last_error(token_client):
    letter = make_dead_letter(error_message="upstream said 503")

    body = token_client.get(f"/report/task/{letter.task.public_id}/status").json()

    assert body["status"] == "dead"
    assert body["last_error"] == "reports.errors.TransientError: upstream said 503"
    assert body["output_path"] is None and body["download_url"] is None


@pytest.mark.parametrize("task_id", ["5b6f0c52-2a43-4d0e-9a51-3f1c7d2e8b90", "not-a-uuid", "1", "%2e%2e"])
def test_unknown_or_malformed_ids_are_404_json(token_client, task_id):
    make_task()
    for suffix in ("status", "output"):
        response = token_client.get(f"/report/task/{task_id}/{suffix}")
        assert response.status_code == 404
        assert response.json() == {"error": "no such task", "field": None}
    response = token_client.post(f"/report/task/{task_id}/replay", content_type="application/json")
    assert response.status_code == 404


# --- replay -----------------------------------------------------------------------


def test_replay_of_a_dead_task(token_client, redis_conn):
    letter = make_dead_letter()
    task = letter.task

    with_reason = {"reason": "upstream fixed"}
    response = token_client.post(
        f"/report/task/{task.public_id}/replay", data=with_reason, content_type="application/json"
    )

    assert response.status_code == 200
    assert response.json() == {"ok": True}
    task.refresh_from_db()
    letter.refresh_from_db()
    assert task.status == TaskStatus.PENDING and task.max_attempts == task.attempt + 3
    assert letter.status == DeadLetterStatus.REPLAYED and letter.replayed_by == "token:test-client"
    audit = AuditEntry.objects.get(action="replay")
    assert (audit.source, audit.actor, audit.reason) == ("api", "token:test-client", "upstream fixed")


def test_replay_with_an_empty_body_is_fine(token_client):
    letter = make_dead_letter()

    response = token_client.generic("POST", f"/report/task/{letter.task.public_id}/replay")

    assert response.status_code == 200


@pytest.mark.parametrize("body", [b" ", b"\r\n\t "])
def test_a_whitespace_body_is_a_body_and_not_json(token_client, body):
    """No body at all means "no reason"; a body of blanks is not the JSON object the document asks."""
    letter = make_dead_letter()

    response = token_client.generic(
        "POST", f"/report/task/{letter.task.public_id}/replay", body, content_type="application/json"
    )

    assert response.status_code == 400
    assert "not valid JSON" in response.json()["error"]
    letter.task.refresh_from_db()
    assert letter.task.status == TaskStatus.DEAD


@pytest.mark.parametrize("status", [TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.DONE])
def test_replay_of_a_task_that_is_not_dead_is_409(token_client, status):
    task = make_task(status=status)

    response = token_client.post(f"/report/task/{task.public_id}/replay", content_type="application/json")

    assert response.status_code == 409
    assert status in response.json()["error"]
    task.refresh_from_db()
    assert task.status == status
    assert not AuditEntry.objects.exists()


def test_replay_twice_is_200_then_409_saying_when_but_not_who(token_client, django_user_model):
    letter = make_dead_letter()
    url = f"/report/task/{letter.task.public_id}/replay"

    assert token_client.generic("POST", url).status_code == 200
    second = token_client.generic("POST", url)

    assert second.status_code == 409
    letter.refresh_from_db()
    assert second.json()["error"] == (
        f"task {letter.task.public_id} is pending, not dead; it was replayed at "
        f"{letter.replayed_at:%Y-%m-%d %H:%M:%S} UTC"
    )
    assert AuditEntry.objects.filter(action="replay").count() == 1


def test_a_replay_conflict_never_names_the_operator_who_replayed(token_client, django_user_model):
    """Clients learn that the task was replayed, not the console usernames of the operators."""
    operator = django_user_model.objects.create_user("op1", password="pw-123456789", is_staff=True)
    letter = make_dead_letter()
    replay_task(task_id=letter.task_id, actor=operator.get_username(), source="console")

    response = token_client.generic("POST", f"/report/task/{letter.task.public_id}/replay")

    assert response.status_code == 409
    assert "op1" not in response.content.decode()
    assert "replayed at" in response.json()["error"]


@pytest.mark.parametrize(
    "body, status, field",
    [
        ({"reason": 5}, 422, "reason"),
        ({"reason": "x" * 2001}, 422, "reason"),
        ({"force": True}, 400, "force"),
    ],
)
def test_replay_body_errors_change_nothing(token_client, body, status, field):
    letter = make_dead_letter()

    response = token_client.post(
        f"/report/task/{letter.task.public_id}/replay", data=body, content_type="application/json"
    )

    assert response.status_code == status
    assert response.json()["field"] == field
    letter.task.refresh_from_db()
    assert letter.task.status == TaskStatus.DEAD


def test_replay_get_is_405(token_client):
    letter = make_dead_letter()

    response = token_client.get(f"/report/task/{letter.task.public_id}/replay")

    assert response.status_code == 405 and response["Allow"] == "POST"


@pytest.mark.django_db(transaction=True)
def test_ten_concurrent_replays_replay_once(live_server, api_token, redis_conn):
    letter = make_dead_letter()
    task = letter.task
    url = f"{live_server.url}/report/task/{task.public_id}/replay"
    barrier = threading.Barrier(10)
    statuses: list[int] = []

    def replay():
        barrier.wait()
        response = requests.post(url, headers={"Authorization": f"Bearer {api_token}"}, timeout=60)
        statuses.append(response.status_code)

    threads = [threading.Thread(target=replay) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)

    assert sorted(statuses) == [200] + [409] * 9
    task.refresh_from_db()
    assert task.status == TaskStatus.PENDING
    assert AuditEntry.objects.filter(action="replay", task=task).count() == 1
    job_id = job_id_for(task.pk, task.attempt + 1)
    queued = [j.decode() for j in redis_conn.lrange(f"rq:queue:{task.priority}", 0, -1)]
    assert queued.count(job_id) == 1


# --- output -----------------------------------------------------------------------


def test_output_serves_the_file_of_a_done_task(token_client, media_root):
    (media_root / "probe" / "abc").mkdir(parents=True)
    (media_root / "probe" / "abc" / "report.csv").write_text("task,attempt\nx,1\n")
    task = make_task(status=TaskStatus.DONE, attempt=1, output_file="probe/abc/report.csv")

    response = token_client.get(f"/report/task/{task.public_id}/output")

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b"task,attempt\nx,1\n"
    assert 'attachment; filename="report.csv"' in response["Content-Disposition"]
    assert response["Content-Type"] == "text/csv; charset=utf-8"


def test_output_needs_authentication(client, media_root):
    (media_root / "r.csv").parent.mkdir(parents=True, exist_ok=True)
    (media_root / "r.csv").write_text("secret")
    task = make_task(status=TaskStatus.DONE, output_file="r.csv")

    response = client.get(f"/report/task/{task.public_id}/output")

    assert response.status_code == 401


def test_output_of_an_unfinished_task_is_409(token_client):
    task = make_task(status=TaskStatus.RUNNING, attempt=1)

    response = token_client.get(f"/report/task/{task.public_id}/output")

    assert response.status_code == 409


@pytest.mark.parametrize(
    "output_file", ["", "missing.csv", "../outside.txt", "/etc/hostname", "probe/../../outside.txt"]
)
def test_output_missing_or_outside_media_root_is_404(token_client, media_root, output_file):
    media_root.mkdir(parents=True, exist_ok=True)
    (media_root.parent / "outside.txt").write_text("not yours")
    task = make_task(status=TaskStatus.DONE, output_file=output_file)

    response = token_client.get(f"/report/task/{task.public_id}/output")

    assert response.status_code == 404
    assert response.json()["error"] == "the task's output file is missing"


# --- dead-letter list -------------------------------------------------------------


def listing(client, **params):
    response = client.get("/report/task/dead-letters", params)
    assert response.status_code == 200, response.content
    return response.json()


def test_lists_open_unexpired_letters_newest_first(token_client, settings):
    settings.CONSOLE_BASE_URL = "https://console.example"
    now = timezone.now()
    old = make_dead_letter(created_at=now - timedelta(hours=2), error_message="first line\nsecond line")
    new = make_dead_letter(created_at=now - timedelta(hours=1))
    make_dead_letter(expire_at=now - timedelta(seconds=1))  # expired, not yet archived
    for status in (DeadLetterStatus.REPLAYED, DeadLetterStatus.ARCHIVED, DeadLetterStatus.DISCARDED):
        make_dead_letter(status=status)

    body = listing(token_client)

    assert [row["id"] for row in body["results"]] == [new.pk, old.pk]
    assert body["next_cursor"] is None
    row = body["results"][1]
    assert row == {
        "id": old.pk,
        "task_id": str(old.task.public_id),
        "kind": "probe",
        "error_type": "reports.errors.TransientError",
        "error_message": "first line",
        "attempts": 3,
        "fingerprint": old.fingerprint,
        "created_at": old.created_at.isoformat(),
        "expire_at": old.expire_at.isoformat(),
        "console_url": f"https://console.example/console/dead-letters/{old.pk}/",
        "status": "open",
        "superseded_by": None,
    }


def test_long_messages_are_truncated(token_client):
    make_dead_letter(error_message="x" * 5000)

    [row] = listing(token_client)["results"]

    assert len(row["error_message"]) == 300 and row["error_message"].endswith("…")


def test_filters_by_kind_and_fingerprint(token_client):
    a = make_dead_letter(error_message="disk full")
    b = make_dead_letter(error_message="timeout talking to erp")
    c = make_dead_letter(
        task=make_task(kind="sales_summary", status="dead", attempt=1), error_message="disk full"
    )

    assert {r["id"] for r in listing(token_client, kind="sales_summary")["results"]} == {c.pk}
    assert {r["id"] for r in listing(token_client, fingerprint=a.fingerprint)["results"]} == {a.pk, c.pk}
    both = listing(token_client, fingerprint=a.fingerprint, kind="probe")["results"]
    assert [r["id"] for r in both] == [a.pk]
    assert b.fingerprint != a.fingerprint


def test_cursor_pages_through_everything_once_even_with_equal_timestamps(token_client):
    stamp = timezone.now() - timedelta(minutes=5)
    ids = {make_dead_letter(created_at=stamp if i % 2 else stamp - timedelta(seconds=i)).pk for i in range(7)}

    seen, cursor, pages = [], None, 0
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        body = listing(token_client, **params)
        seen += [r["id"] for r in body["results"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break

    assert pages == 3
    assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen))
    keys = [(DeadLetter.objects.get(pk=pk).created_at, pk) for pk in seen]
    assert keys == sorted(keys, reverse=True)


def test_default_page_is_50(token_client):
    task = make_task(status="dead", attempt=3)
    DeadLetter.objects.bulk_create(
        DeadLetter(task=task, kind="probe", error_type="E", attempts=3, fingerprint="f" * 40)
        for _ in range(51)
    )

    body = listing(token_client)

    assert len(body["results"]) == 50 and body["next_cursor"]
    assert len(listing(token_client, cursor=body["next_cursor"])["results"]) == 1


@pytest.mark.parametrize(
    "params, field",
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "201"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"cursor": "garbage!"}, "cursor"),
        ({"cursor": "eyJjIjoxfQ"}, "cursor"),
        ({"fingerprint": "XYZ"}, "fingerprint"),
        ({"kind": ""}, "kind"),
        ({"status": "archived"}, "status"),
    ],
)
def test_bad_query_parameters_are_400_naming_them(token_client, params, field):
    response = token_client.get("/report/task/dead-letters", params)

    assert response.status_code == 400
    assert response.json()["field"] == field


def test_repeated_parameter_is_400(token_client):
    response = token_client.get("/report/task/dead-letters?kind=probe&kind=sales_summary")

    assert response.status_code == 400 and response.json()["field"] == "kind"


def test_replayed_task_leaves_the_list(token_client):
    letter = make_dead_letter()
    assert [r["id"] for r in listing(token_client)["results"]] == [letter.pk]

    token_client.generic("POST", f"/report/task/{letter.task.public_id}/replay")

    assert listing(token_client)["results"] == []
    assert ReportTask.objects.get(pk=letter.task_id).status == TaskStatus.PENDING


def test_api_audit_entries_record_the_client_address_behind_trusted_proxies(token_client, settings):
    settings.CONSOLE_TRUSTED_PROXY_COUNT = 1
    settings.CONSOLE_TRUSTED_PROXIES = (ipaddress.ip_network("10.0.0.0/8"),)
    task = make_dead_letter().task

    response = token_client.post(
        f"/report/task/{task.public_id}/replay",
        content_type="application/json",
        REMOTE_ADDR="10.0.0.2",  # the proxy
        HTTP_X_FORWARDED_FOR="198.51.100.66, 203.0.113.9",  # a forged left end, then what the proxy saw
    )

    assert response.status_code == 200
    assert AuditEntry.objects.get(action="replay").ip_address == "203.0.113.9"
