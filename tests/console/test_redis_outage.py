"""The console while Redis is down: the dashboard answers at once and says so (a Redis error that
reaches a view is a 503 page, tests/config/test_unavailable.py)."""

import logging
import re
import time

from config.embedded_redis import free_port
from config.unavailable import WEB_RETRY_ATTEMPTS


def test_the_dashboard_answers_quickly_while_redis_is_down(admin_client, settings, caplog):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="config.redis"):
        response = admin_client.get("/console/")
    assert response.status_code == 200
    assert "Redis unreachable" in response.content.decode()
    # Each Redis call gives up after the request's retries (about a second), not the background
    # budget (10-21 s): counted from what the retry loop says, whatever the machine's load.
    found = (re.search(r"gave up after (\d+) retries", r.getMessage()) for r in caplog.records)
    gave_up = [int(m[1]) for m in found if m]
    assert gave_up and set(gave_up) == {WEB_RETRY_ATTEMPTS}, caplog.text
    assert WEB_RETRY_ATTEMPTS <= 3
    print(f"dashboard answered in {time.monotonic() - started:.2f} s with Redis down")
