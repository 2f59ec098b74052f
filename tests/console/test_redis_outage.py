"""The console while Redis is down or failing over: a 503 page with Retry-After, never a 500."""

import time

import redis
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory

from config.embedded_redis import free_port
from config.unavailable import RedisUnavailableMiddleware


def test_a_redis_timeout_in_a_console_view_is_a_503_page(db):
    request = RequestFactory().get("/console/dead-letters/")
    request.user = AnonymousUser()
    middleware = RedisUnavailableMiddleware(lambda request: None)

    response = middleware.process_exception(request, redis.TimeoutError("Timeout reading from socket"))

    assert response.status_code == 503
    assert int(response["Retry-After"]) > 0
    assert "Temporarily unavailable" in response.content.decode()


def test_the_dashboard_answers_quickly_while_redis_is_down(admin_client, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    started = time.monotonic()
    response = admin_client.get("/console/")
    assert response.status_code == 200
    assert "Redis unreachable" in response.content.decode()
    # Three retries inside a request (about a second), not the background budget (10-21 s).
    assert time.monotonic() - started < 8
