"""handler500 (config.unavailable.server_error): an outage of the database or Redis is a 503 with
Retry-After, JSON in the API's error format or a page that names what is down; any other error
stays a 500 (JSON for the API). tests/system/test_outage_answers.py stops a real PostgreSQL and a
real Redis under gunicorn."""

import json

import pytest
import redis
from django.db import OperationalError
from django.test import RequestFactory
from django.utils import translation
from django.utils.functional import SimpleLazyObject

from config.embedded_redis import free_port
from config.unavailable import outage_of, server_error


def _answer(path: str, exception: Exception, **headers):
    request = RequestFactory().get(path, **headers)
    request.user = SimpleLazyObject(_database_down)  # what the session's user is while the database is down
    try:
        raise exception
    except Exception:
        return server_error(request)


def _database_down():
    raise OperationalError("connection to server at 127.0.0.1, port 5432 failed: Connection refused")


def _real_connection_error() -> redis.ConnectionError:
    client = redis.Redis(port=free_port(), socket_connect_timeout=0.5, retry=None)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        return exc
    raise AssertionError("a closed port answered")


@pytest.mark.parametrize(
    ("exception", "down"),
    [
        (OperationalError("server closed the connection unexpectedly"), "database"),
        (_real_connection_error(), "redis"),
        (redis.TimeoutError("Timeout reading from socket"), "redis"),
    ],
)
def test_an_outage_on_an_api_path_is_a_json_503_with_retry_after(exception, down, caplog):
    response = _answer("/report/task/submit", exception)

    assert response.status_code == 503
    assert int(response["Retry-After"]) > 0
    body = json.loads(response.content)
    assert body["field"] is None
    assert ("database" if down == "database" else "broker") in body["error"]
    # One warning line that says what failed, not Django's error with a traceback per request.
    [record] = [r for r in caplog.records if r.name.startswith(("config", "django.request"))]
    assert record.levelname == "WARNING" and str(exception).splitlines()[0] in record.getMessage()


def test_an_error_raised_while_handling_an_outage_is_still_the_outage():
    try:
        try:
            _database_down()
        except OperationalError as exc:
            raise RuntimeError("could not save the session") from exc
    except RuntimeError as exc:
        assert outage_of(exc) == "database"
    assert outage_of(ValueError("no")) is None


@pytest.mark.parametrize("language", ["zh-hans", "en"])
def test_the_console_page_names_what_is_down_in_the_operators_language_without_the_database(language):
    # No database fixture: a query would fail the test, as would reading the session's user.
    with translation.override(language):
        database = _answer(
            "/console/dead-letters/", OperationalError("terminating connection")
        ).content.decode()
        broker = _answer("/console/", redis.TimeoutError("Timeout reading from socket")).content.decode()

    if language == "en":
        assert "The database did not answer" in database and "The queue broker (Redis)" in broker
    else:
        assert "数据库没有响应" in database and "队列服务（Redis）没有响应" in broker
        assert "Redis" not in database


def test_other_errors_stay_a_500_and_the_api_says_so_in_json():
    api = _answer("/report/task/submit", ValueError("a bug"))
    page = _answer("/console/", ValueError("a bug"))

    assert api.status_code == page.status_code == 500
    assert json.loads(api.content) == {"error": "internal server error", "field": None}
    assert "Retry-After" not in api and "Retry-After" not in page
