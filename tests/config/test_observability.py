"""JSON logs carry the ids of the work in hand; a local Sentry ingestion endpoint receives a failing
attempt's event with those ids; a local OTLP/HTTP collector receives one trace whose attempt span,
started in another process from the carrier a job holds, continues the submit's span."""

import gzip
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

BASE_DIR = Path(__file__).resolve().parents[2]


class Receiver:
    """A local HTTP server that keeps every POST body by path (Sentry's envelopes, OTLP's exports)."""

    def __init__(self):
        self.bodies: list[tuple[str, bytes]] = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                received.append((self.path, body))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    """`code` in a fresh process with the project's settings loaded under these variables."""
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()\n" + code],
        cwd=BASE_DIR, capture_output=True, text=True, timeout=60,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", **env},
    )
    assert done.returncode == 0, done.stderr
    return done


def test_a_json_log_line_carries_the_ids_bound_around_it():
    done = run_python(
        "import logging\n"
        "from config.observability import log_context\n"
        "with log_context(task_id=41, attempt=3, kind='probe', letter_id=None):\n"
        "    logging.getLogger('reports.worker').warning('attempt failed')\n"
        "logging.getLogger('reports.worker').warning('idle')\n",
        LOG_FORMAT="json",
    )
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert [line["message"] for line in lines] == ["attempt failed", "idle"]
    assert {key: lines[0][key] for key in ("task_id", "attempt", "kind", "level")} == {
        "task_id": 41, "attempt": 3, "kind": "probe", "level": "WARNING"}
    assert "letter_id" not in lines[0] and "task_id" not in lines[1]


def test_plain_logs_stay_plain_by_default():
    done = run_python("import logging\nlogging.getLogger('reports.worker').warning('idle')\n", LOG_FORMAT="")
    assert "WARNING reports.worker" in done.stderr and "{" not in done.stderr


def test_a_local_sentry_endpoint_receives_the_failing_attempts_event_with_its_ids(receiver):
    done = run_python(
        "import sentry_sdk\n"
        "from config.observability import error_capture, log_context\n"
        "with log_context(task_id=7, attempt=2, kind='sales_summary'):\n"
        "    try:\n"
        "        raise RuntimeError('upstream answered 502')\n"
        "    except RuntimeError as error:\n"
        "        print(error_capture(error))\n"
        "sentry_sdk.flush(5)\n",
        SENTRY_DSN=f"http://publickey@127.0.0.1:{receiver.port}/42",
    )
    event_id = done.stdout.strip()
    assert len(event_id) == 32
    envelopes = [body for path, body in receiver.bodies if path == "/api/42/envelope/"]
    events = [json.loads(line) for body in envelopes for line in body.splitlines()[2:3]]
    event = next(event for event in events if event.get("event_id") == event_id)
    assert event["exception"]["values"][-1]["value"] == "upstream answered 502"
    assert {key: event["tags"][key] for key in ("task_id", "attempt", "kind")} == {
        "task_id": "7", "attempt": "2", "kind": "sales_summary"}


def test_no_sentry_event_without_a_dsn():
    done = run_python(
        "from config.observability import error_capture\nprint(error_capture(RuntimeError('x')))\n",
        SENTRY_DSN="")
    assert done.stdout.strip() == "None"


def test_a_local_otlp_collector_receives_one_trace_from_submit_to_attempt(receiver):
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
                "OTEL_BSP_SCHEDULE_DELAY": "100"}
    submit = run_python(
        "import json\n"
        "from config.observability import span, trace_carrier, tracing_flush\n"
        "with span('report.submit', kind='probe'):\n"
        "    print(json.dumps(trace_carrier()))\n"
        "tracing_flush()\n",
        **endpoint,
    )
    carrier = json.loads(submit.stdout)
    assert "traceparent" in carrier
    run_python(
        "from config.observability import log_context, span, tracing_flush\n"
        f"with log_context(task_id=9, attempt=1), span('report.attempt', carrier={carrier!r}):\n"
        "    pass\n"
        "tracing_flush()\n",
        **endpoint,
    )
    spans = {}
    for path, body in receiver.bodies:
        assert path == "/v1/traces"
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                spans.update({item.name: item for item in scope_spans.spans})
    submit_span, attempt_span = spans["report.submit"], spans["report.attempt"]
    assert attempt_span.trace_id == submit_span.trace_id
    assert attempt_span.parent_span_id == submit_span.span_id
    attributes = {item.key: item.value.int_value for item in attempt_span.attributes}
    assert attributes["report.task_id"] == 9
