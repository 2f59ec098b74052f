"""The site under gunicorn while its PostgreSQL is stopped (a fast shutdown, as a restart or a
failover does it) and while its Redis is stopped: every API path answers its usual answer or a JSON
503 with Retry-After, never Django's HTML 500, and the console a page that says what is down in the
operator's language; once the server is back, the same requests succeed."""

import subprocess
import sys

import pytest
import requests

from config.embedded_redis import RedisServer
from tests.conftest import BASE_DIR
from tests.system.private_postgres import PrivatePostgres
from tests.system.test_gunicorn import gunicorn  # noqa: F401 (the fixture)

# What it proves does not depend on the session's database: the site runs on a PostgreSQL of its own.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database_blind]

SETUP = """
from django.contrib.auth.models import Group, User
from reports.models import ApiScope
from reports.services.tokens import create_api_token
user = User.objects.create_user("operator", "", "operator-pass-1", is_staff=True)
user.groups.add(Group.objects.get(name="Operators"))
print(create_api_token(name="outage", scopes=ApiScope.values)[1])
"""


@pytest.fixture
def private_postgres():
    server = PrivatePostgres().start()
    yield server
    server.remove()


@pytest.fixture
def site_redis(tmp_path):
    server = RedisServer(tmp_path / "site-redis").start()
    yield server
    server.stop()


def _manage(env: dict, *argv: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _api_requests(task_id: str) -> list[tuple[str, str, dict | None]]:
    task = f"/report/task/{task_id}"
    return [
        ("POST", "/report/task/submit", {"kind": "probe", "params": {}}),
        ("GET", f"{task}/status", None),
        ("POST", f"{task}/cancel", None),
        ("POST", f"{task}/replay", None),
        ("POST", f"{task}/retry-now", None),
        ("POST", f"{task}/stop", None),
        ("GET", "/report/task/dead-letters", None),
        ("GET", "/report/dead-letters/groups", None),
        ("POST", "/report/batch/submit", {"items": [{"kind": "probe", "params": {}}]}),
        ("GET", "/report/alerts/snoozes", None),
        ("GET", "/metrics", None),
    ]


def _answers(base: str, token: str, task_id: str) -> dict[str, requests.Response]:
    headers = {"Authorization": f"Bearer {token}"}
    return {
        f"{method} {path}": requests.request(method, base + path, json=body, headers=headers, timeout=30)
        for method, path, body in _api_requests(task_id)
    }


def _signed_in(base: str) -> requests.Session:
    session = requests.Session()
    session.cookies.set("django_language", "zh-hans")
    session.get(f"{base}/console/login/", timeout=30)
    signed_in = session.post(
        f"{base}/console/login/",
        data={
            "username": "operator",
            "password": "operator-pass-1",
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
        },
        headers={"Referer": f"{base}/console/login/"},
        timeout=30,
    )
    assert signed_in.status_code == 200 and signed_in.url == f"{base}/console/", signed_in.url
    return session


def _is_json_503(response: requests.Response) -> bool:
    return (
        response.status_code == 503
        and response.headers["Content-Type"] == "application/json"
        and set(response.json()) == {"error", "field"}
        and int(response.headers["Retry-After"]) > 0
    )


def test_a_stopped_database_is_a_json_503_on_every_api_path_and_a_page_in_the_console(
    gunicorn,  # noqa: F811
    private_postgres,
    subprocess_env,
):
    database_url = private_postgres.url
    env = dict(subprocess_env(), DATABASE_URL=database_url)
    _manage(env, "migrate", "--no-input", "-v", "0")
    token = _manage(env, "shell", "-c", SETUP).strip().splitlines()[-1]
    base, _ = gunicorn(DATABASE_URL=database_url)
    headers = {"Authorization": f"Bearer {token}"}
    submitted = requests.post(
        f"{base}/report/task/submit", json={"kind": "probe", "params": {}}, headers=headers, timeout=30
    )
    assert submitted.status_code == 201, submitted.text
    task_id = submitted.json()["task_id"]
    console = _signed_in(base)

    private_postgres.stop()
    answers = _answers(base, token, task_id)
    page = console.get(f"{base}/console/dead-letters/", timeout=30)
    dashboard = console.get(f"{base}/console/", timeout=30)

    assert {
        name: response.status_code for name, response in answers.items() if not _is_json_503(response)
    } == {}
    assert "database" in answers[f"GET /report/task/{task_id}/status"].json()["error"]
    for response in (page, dashboard):
        assert response.status_code == 503 and int(response.headers["Retry-After"]) > 0
        assert "数据库没有响应" in response.text and "暂时不可用" in response.text

    private_postgres.start()
    assert (
        requests.get(f"{base}/report/task/{task_id}/status", headers=headers, timeout=30).status_code == 200
    )
    assert console.get(f"{base}/console/dead-letters/", timeout=30).status_code == 200


def test_a_stopped_redis_never_makes_an_api_path_answer_500(
    gunicorn,  # noqa: F811
    site_redis,
    operator,
    api_token,
):
    """Redis is only transport: the API rides out its outage (a submit is enqueued later)."""
    from reports.services import submit_task

    task_id = submit_task(kind="probe", params={}).task.public_id
    base, _ = gunicorn(REDIS_URL=site_redis.url)
    console = _signed_in(base)

    site_redis.stop()
    answers = _answers(base, api_token, task_id)
    page = console.get(f"{base}/console/", timeout=30)

    unexpected = {
        name: (response.status_code, response.text[:200])
        for name, response in answers.items()
        if response.status_code >= 500 and not _is_json_503(response)
    }
    assert unexpected == {}
    assert page.status_code == 200  # the dashboard says Redis is unreachable and shows the rest
