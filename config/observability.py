"""Logs, errors and traces in the tools a team already runs; each is off until its variable is set.

- LOG_FORMAT=json: one JSON object a line (python-json-logger), carrying the ids of the work in
  hand (task_id, attempt, kind, letter_id, fingerprint) that `log_context` binds around it.
- SENTRY_DSN: sentry-sdk with its Django and RQ integrations; a failing attempt is one event,
  tagged with the same ids (`error_capture`), and its id is kept with the attempt.
- OTEL_EXPORTER_OTLP_ENDPOINT (OpenTelemetry's own variable): traces over OTLP/HTTP. The submit
  request opens a trace, `trace_carrier()` puts its context in the job, and the attempt's span in
  the worker process continues it (`span(..., carrier=...)`): one trace from submit to attempt.
"""

import contextvars
import logging
import os
from contextlib import contextmanager

_ids: contextvars.ContextVar[dict | None] = contextvars.ContextVar("report_log_ids", default=None)
_tracer = None


@contextmanager
def log_context(**ids):
    """Bind these ids (None values left out) to every log line, error and span inside the block."""
    given = {name: value for name, value in ids.items() if value is not None}
    token = _ids.set({**(_ids.get() or {}), **given})
    try:
        yield
    finally:
        _ids.reset(token)


class ContextIds(logging.Filter):
    """Puts the bound ids on each record, where the JSON formatter finds them."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in (_ids.get() or {}).items():
            setattr(record, name, value)
        return True


def logging_config(*, level: str, json_lines: bool) -> dict:
    plain = "%(asctime)s %(levelname)s %(name)s %(process)d %(message)s"
    formatter = (
        {"()": "pythonjsonlogger.json.JsonFormatter", "format": plain,
         "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"}}
        if json_lines else {"format": plain}
    )
    handler = {"class": "logging.StreamHandler", "formatter": "main", "filters": ["ids"]}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"ids": {"()": ContextIds}},
        "formatters": {"main": formatter},
        "handlers": {"console": handler},
        "loggers": {
            app: {"handlers": ["console"], "level": level, "propagate": True}
            for app in ("config", "reports", "deadletters", "console", "api")
        },
    }


def sentry_init(dsn: str, *, release: str) -> None:
    if not dsn:
        return
    import sentry_sdk
    from sentry_sdk.integrations.django import DjangoIntegration
    from sentry_sdk.integrations.rq import RqIntegration

    # No request bodies, cookies or user data: params and tokens stay on this side.
    sentry_sdk.init(dsn=dsn, release=release or None, send_default_pii=False, max_request_body_size="never",
                    integrations=[DjangoIntegration(), RqIntegration()])


def error_capture(error: BaseException) -> str | None:
    """Send a failing attempt's error to Sentry (when on) with the bound ids as tags; its event id."""
    import sentry_sdk

    if not sentry_sdk.get_client().is_active():
        return None
    with sentry_sdk.new_scope() as scope:
        for name, value in (_ids.get() or {}).items():
            scope.set_tag(name, str(value))
        return sentry_sdk.capture_exception(error)


def tracing_init() -> None:
    """Export spans over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set (once per process)."""
    global _tracer
    if _tracer is not None or not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    service = os.environ.get("OTEL_SERVICE_NAME", "report-console")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _tracer = trace.get_tracer("report-console")


def trace_carrier() -> dict:
    """The current trace context as a small dict to carry in a job (empty when tracing is off)."""
    if _tracer is None:
        return {}
    from opentelemetry.propagate import inject

    carrier: dict = {}
    inject(carrier)
    return carrier


def trace_meta() -> dict:
    """{"trace": carrier} for a job's meta while tracing is on, else nothing."""
    carrier = trace_carrier()
    return {"trace": carrier} if carrier else {}


@contextmanager
def span(name: str, *, carrier: dict | None = None, **attributes):
    """A span named `name` (continuing the trace in `carrier`), tagged with the bound ids."""
    if _tracer is None:
        yield None
        return
    from opentelemetry.propagate import extract

    context = extract(carrier) if carrier else None
    with _tracer.start_as_current_span(name, context=context) as current:
        for key, value in {**(_ids.get() or {}), **attributes}.items():
            if value is not None:
                current.set_attribute(
                    f"report.{key}", value if isinstance(value, int | float | bool) else str(value)
                )
        yield current


def tracing_flush() -> None:
    if _tracer is not None:
        from opentelemetry import trace

        trace.get_tracer_provider().force_flush()
