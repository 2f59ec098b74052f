"""The API while Redis is down or failing over: a submit is accepted (the reaper enqueues it
later). A Redis error that reaches a view is a JSON 503 (tests/config/test_unavailable.py)."""

import pytest

from config.embedded_redis import free_port
from reports.models import ReportTask, TaskStatus
from reports.services.enqueue import job_id_for
from tests.reaping import reap_tasks
from transport.queues import job_ids_waiting, job_states


@pytest.mark.django_db(transaction=True)  # the enqueue runs on commit: commits must happen
def test_submit_while_redis_is_down_is_accepted_and_the_reaper_enqueues_it(token_client, settings):
    working = settings.REDIS_URL
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    response = token_client.post(
        "/report/task/submit", {"kind": "probe", "params": {}}, content_type="application/json"
    )
    assert response.status_code == 201, response.content[:500]
    settings.REDIS_URL = working
    settings.REPORT_REENQUEUE_AFTER = 0
    task = ReportTask.objects.get(public_id=response.json()["task_id"])
    assert task.status == TaskStatus.PENDING
    assert job_states([job_id_for(task.pk, 1)]) == {job_id_for(task.pk, 1): None}

    reap_tasks(use_lock=False)

    assert job_id_for(task.pk, 1) in job_ids_waiting(settings.REPORT_QUEUES)
