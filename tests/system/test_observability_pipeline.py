"""Logs, errors and traces through the real pipeline: a task submitted through the API (in a web
process with tracing on) that fails in a worker (with LOG_FORMAT=json, SENTRY_DSN and an OTLP
endpoint) gives one trace from the submit request to the attempt in the worker process, one Sentry
event tagged with the task's ids, and JSON log lines of the attempt carrying those ids."""

import json
import subprocess
import sys

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from reports.models import ReportTask, TaskStatus
from tests.config.test_observability import Receiver
from tests.conftest import BASE_DIR, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SUBMIT = """
import json, sys
from django.test import Client
from config.observability import tracing_flush
answer = Client().post("/report/task/submit",
                       json.dumps({"kind": "probe", "params": {"fail_permanently": True}}),
                       content_type="application/json", HTTP_AUTHORIZATION="Bearer " + sys.argv[1])
print(answer.status_code, answer.content.decode())
tracing_flush()
"""


def spans_received(receiver: Receiver) -> dict:
    spans = {}
    for path, body in receiver.bodies:
        if path == "/v1/traces":
            for resource_spans in ExportTraceServiceRequest.FromString(body).resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    spans.update({item.name: item for item in scope_spans.spans})
    return spans


def test_a_failing_attempt_is_one_trace_from_submit_one_sentry_event_and_json_lines(
    start_worker, subprocess_env, api_token
):
    receiver = Receiver()
    try:
        tools = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "SENTRY_DSN": f"http://publickey@127.0.0.1:{receiver.port}/42",
            "LOG_FORMAT": "json",
        }
        worker = start_worker(**tools)
        env = {**subprocess_env(), **tools, "ALLOWED_HOSTS": "testserver"}
        web = subprocess.run([sys.executable, "-c", "import django; django.setup()\n" + SUBMIT, api_token],
                             cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=120)
        assert web.stdout.startswith(("201", "202")), web.stdout + web.stderr
        task = ReportTask.objects.get(public_id=json.loads(web.stdout.split(" ", 1)[1])["task_id"])
        wait_until(lambda: ReportTask.objects.get(pk=task.pk).status == TaskStatus.DEAD, timeout=60,
                   message="the probe to die")

        wait_until(lambda: {"report.submit", "report.attempt"} <= set(spans_received(receiver)), timeout=30,
                   message="both spans at the collector")
        spans = spans_received(receiver)
        assert spans["report.attempt"].trace_id == spans["report.submit"].trace_id
        events = lambda: [  # noqa: E731
            json.loads(line) for path, body in receiver.bodies if path == "/api/42/envelope/"
            for line in body.splitlines()[2:3]
        ]
        wait_until(lambda: any(event.get("tags", {}).get("task_id") == str(task.pk) for event in events()),
                   timeout=30, message="the attempt's Sentry event")

        lines = [json.loads(line) for line in worker.output().splitlines() if line.startswith("{")]
        assert any(line.get("task_id") == task.pk and line.get("attempt") == 1 for line in lines), lines[-10:]
    finally:
        receiver.close()
