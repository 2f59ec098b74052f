"""The language of the API's texts: English unless the client asks for Chinese in Accept-Language,
whatever LANGUAGE_CODE says; then the texts it shares with the console (the services' refusals)
are Chinese, and the API's own (authentication, not found) stay English, as `field` always does."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from reports.models import TaskAttempt, TaskStatus
from reports.services.tokens import create_api_token
from tests.factories import make_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator_client():
    _token, raw = create_api_token(name="ops", scopes=("submit", "read", "replay", "operator"))
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


@pytest.fixture
def running():
    now = timezone.now()
    task = make_task(status=TaskStatus.RUNNING, attempt=1, started_at=now,
                     lease_expires_at=now + timedelta(seconds=30))
    TaskAttempt.objects.create(task=task, number=1, started_at=now, worker="host-a pid 42")
    return task


def cancel(client, task_id, **headers):
    return client.post(f"/report/task/{task_id}/cancel", data="", content_type="application/json", **headers)


@pytest.mark.parametrize("accept", [None, "", "fr-FR, de;q=0.8", "*", "en-US,zh-CN;q=0.1,*;q=0.5"])
def test_a_client_that_does_not_ask_for_chinese_reads_english_even_where_language_code_is_chinese(
    settings, operator_client, running, accept
):
    settings.LANGUAGE_CODE = "zh-hans"
    headers = {} if accept is None else {"HTTP_ACCEPT_LANGUAGE": accept}
    response = cancel(operator_client, running.public_id, **headers)
    assert response.status_code == 409
    assert response.json()["error"] == (
        f"cannot cancel task {running.public_id}: it is running; "
        "only a pending or retrying task can be cancelled"
    )


@pytest.mark.parametrize("accept", ["zh-CN", "zh-Hans,en;q=0.5", "fr, zh;q=0.4"])
def test_a_client_that_asks_for_chinese_reads_the_shared_refusals_in_chinese(operator_client, running,
                                                                             accept):
    response = cancel(operator_client, running.public_id, HTTP_ACCEPT_LANGUAGE=accept)
    assert response.status_code == 409
    assert response.json() == {
        "error": f"无法取消任务 {running.public_id}：它当前运行中；只有等待中或重试中的任务可以取消",
        "field": None,
    }
    unknown = operator_client.post(
        "/report/kind/nowhere/pause", data="", content_type="application/json", HTTP_ACCEPT_LANGUAGE=accept
    )
    assert unknown.status_code == 404 and unknown.json()["error"].startswith("未知的报表类型；已知：")
    # The API's own texts stay English: a machine reads them, as it reads `field`.
    missing = cancel(operator_client, "0c33da45-b440-4007-b509-14e147ea72af", HTTP_ACCEPT_LANGUAGE=accept)
    assert missing.status_code == 404 and missing.json()["error"] == "no such task"
    anonymous = Client().post(f"/report/task/{running.public_id}/cancel", HTTP_ACCEPT_LANGUAGE=accept)
    assert anonymous.status_code == 401 and anonymous.json()["error"].isascii()
