"""With DEBUG on, the error page shows settings, the request's META (the environment, under
runserver) and the frames' locals: none of them may show a password, token or webhook."""

import json
import sys

import pytest
from django.test import RequestFactory
from django.views.debug import technical_500_response

from config.error_reports import mask_url_secrets

WEBHOOK = "https://oapi.dingtalk.com/robot/send?access_token=robot-token-4f1c9e"
DATABASE_URL = "postgres://reports:db-pass-8d2a@db.internal:5432/reports"
REDIS_URL = "redis://:redis-pass-77e1@redis.internal:6379/0"
# A channel's secret may be a path segment of its URL, which no URL rule can tell from a name.
ALERT_CHANNELS = json.dumps([{"name": "ops", "type": "slack", "url": "https://hooks.example/s/chan-9c9c1d"}])
SECRETS = ("robot-token-4f1c9e", "db-pass-8d2a", "redis-pass-77e1", "export-pass-5b5b", "chan-9c9c1d")


@pytest.fixture
def production_like(settings):
    settings.DEBUG = True
    settings.DINGTALK_WEBHOOK = WEBHOOK
    settings.ALERT_CHANNELS = ALERT_CHANNELS
    settings.DATABASE_URL = DATABASE_URL
    settings.REDIS_URL = REDIS_URL
    settings.RQ_QUEUES = {"default": {"URL": REDIS_URL}}
    settings.HTTP_EXPORT_URL = "https://exporter:export-pass-5b5b@export.internal/orders.json"
    return settings


def _error_page(request) -> str:
    webhook = WEBHOOK  # noqa: F841 - a local the page lists
    connection = f"failed to reach {REDIS_URL}"  # noqa: F841
    try:
        raise ConnectionError("the report backend is down")
    except ConnectionError:
        return technical_500_response(request, *sys.exc_info()).content.decode()


@pytest.mark.parametrize("accept", ["text/html", "text/plain"])
def test_debug_page_masks_urls_webhook_and_environment(production_like, accept):
    environment = {
        "DATABASE_URL": DATABASE_URL, "REDIS_URL": REDIS_URL, "DINGTALK_WEBHOOK": WEBHOOK,
        "ALERT_CHANNELS": ALERT_CHANNELS,
    }
    request = RequestFactory().get("/console/", HTTP_ACCEPT=accept, **environment)
    page = _error_page(request)
    assert "DINGTALK_WEBHOOK" in page and "the report backend is down" in page
    assert "https://exporter:********************@export.internal/orders.json" in page
    for secret in SECRETS:
        assert secret not in page, secret


def test_mask_url_secrets_keeps_what_is_not_secret():
    assert mask_url_secrets("https://console.example/dead-letters/?page=2") == "https://console.example/dead-letters/?page=2"
    assert mask_url_secrets("redis://:pw@r:6379/0") == "redis://:********************@r:6379/0"
    masked = "postgres://u:********************@h/db and more"
    assert mask_url_secrets("postgres://u:p@h/db and more") == masked
    assert mask_url_secrets("https://x/send?a=1&access_token=abc&b=2") == "https://x/send?a=1&access_token=********************&b=2"
