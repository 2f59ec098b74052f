"""GET /metrics: the pipeline in Prometheus' text format, read from the database and Redis at
scrape time by one custom collector (no counter lives in this process: every web process
answers the same). docs/deploy.md "## Metrics" says what each metric means.

Who may scrape: a bearer API token with the `metrics` scope, or a client address listed in
METRICS_ALLOWED_ADDRESSES (an address or a network; the address as deadletters.audit.client_ip
decides it, so a spoofed X-Forwarded-For only counts behind CONSOLE_TRUSTED_PROXY_COUNT proxies)."""

import ipaddress
import time

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeHistogramMetricFamily, GaugeMetricFamily

from deadletters import metrics as letter_metrics
from deadletters.alerts.health import alert_health
from deadletters.audit import client_ip
from deadletters.services.retention import data_kept
from reports import metrics as task_metrics
from reports.errors import INFRASTRUCTURE
from reports.kinds import KINDS
from reports.models import ApiScope
from reports.services.counters import CANCELLATIONS, DEATHS, STOPS
from reports.services.infra_waits import waits_event
from reports.services.tokens import authenticate_token
from transport.overview import queue_overview

PREFIX = "report_"
BEARER_CHALLENGE = 'Bearer realm="report-metrics"'


def _gauge(name, documentation, labels=(), samples=()):
    family = GaugeMetricFamily(PREFIX + name, documentation, labels=list(labels))
    for label_values, value in samples:
        family.add_metric(list(label_values), value)
    return family


def _counter(name, documentation, counts: dict[str, int], label="kind"):
    family = CounterMetricFamily(PREFIX + name, documentation, labels=[label])
    for kind, value in sorted(counts.items()):
        family.add_metric([kind], value)
    return family


def _histogram(name, documentation, histograms):
    family = GaugeHistogramMetricFamily(PREFIX + name, documentation, labels=["kind"])
    for histogram in histograms:
        buckets = [(_bound(bound), n) for bound, n in histogram.buckets] + [("+Inf", histogram.count)]
        family.add_metric([histogram.kind], buckets, gsum_value=histogram.total)
    return family


def _bound(value: float) -> str:
    return repr(float(value))


def _timestamp(moment) -> float:
    return moment.timestamp() if moment is not None else 0.0


class PipelineCollector:
    """Every metric, computed when Prometheus scrapes."""

    def collect(self):
        started = time.perf_counter()
        yield from self._tasks()
        yield from self._dead_letters()
        yield from self._attempt_windows()
        yield from self._alerts()
        yield from self._transport()
        yield from self._kept()
        yield _gauge(
            "metrics_scrape_seconds",
            "How long this scrape's queries took.",
            samples=[((), time.perf_counter() - started)],
        )

    def _tasks(self):
        rows = task_metrics.live_task_counts()
        yield _gauge(
            "tasks",
            "Report tasks waiting or running now, by kind and status (pending, running, retrying).",
            ("kind", "status"),
            [((kind, status), n) for kind, status, n in rows],
        )
        waiting = task_metrics.oldest_waiting_seconds()
        yield _gauge(
            "queue_oldest_waiting_seconds",
            "Per queue: how long its longest-waiting claimable task (pending, retrying and due, or "
            "waiting out an outage of ours) has waited.",
            ("queue",),
            [((queue,), waiting.get(queue, 0.0)) for queue in settings.REPORT_QUEUES],
        )
        zero = dict.fromkeys(KINDS, 0)
        yield _counter("task_completions", "Tasks that finished done.", zero | task_metrics.completions())
        events: dict[str, dict[str, int]] = {}
        for kind, event, count in task_metrics.event_counters():
            events.setdefault(event, {})[kind] = count
        yield _counter(
            "task_deaths",
            "Times a task died (a replayed task that dies again counts again).",
            zero | events.get(DEATHS, {}),
        )
        yield _counter(
            "task_cancellations",
            "Tasks cancelled by an operator or their client.",
            zero | events.get(CANCELLATIONS, {}),
        )
        yield _counter("attempt_stops", "Running attempts an operator stopped.", zero | events.get(STOPS, {}))
        yield _counter(
            "infrastructure_waits",
            "Attempts that failed because our own infrastructure did (the report storage, the database, "
            "Redis), not charged to their task.",
            {component: sum(events.get(waits_event(component), {}).values()) for component in INFRASTRUCTURE},
            label="component",
        )
        waiting = {component: n for component, n, _ in task_metrics.infrastructure_waits()}
        yield _gauge(
            "infrastructure_waiting_tasks",
            "Tasks waiting now for an outage of our own infrastructure to end, by component.",
            ("component",),
            [((component,), waiting.get(component, 0)) for component in INFRASTRUCTURE],
        )

    def _dead_letters(self):
        letters = letter_metrics.open_letters(top_causes=settings.METRICS_TOP_CAUSES)
        yield _gauge(
            "dead_letters_open",
            "Open dead letters by kind.",
            ("kind",),
            [((kind,), letters.by_kind.get(kind, 0)) for kind in sorted(set(KINDS) | set(letters.by_kind))],
        )
        yield _gauge(
            "dead_letters_open_by_cause",
            'Open dead letters of the METRICS_TOP_CAUSES largest causes (fingerprint), the rest as "other".',
            ("fingerprint", "error_type"),
            [
                ((fingerprint[:12] if fingerprint != letter_metrics.OTHER else fingerprint, error_type), n)
                for (fingerprint, error_type), n in letters.by_cause.items()
            ],
        )
        yield _gauge(
            "bulk_runs",
            "Bulk dead-letter actions by action and state.",
            ("action", "status"),
            [((action, status), n) for action, status, n in letter_metrics.bulk_runs_by_state()],
        )

    def _attempt_windows(self):
        window = settings.METRICS_WINDOW_SECONDS
        yield _histogram(
            "attempt_duration_seconds",
            f"Run time of the attempts that finished in the last METRICS_WINDOW_SECONDS ({window}s).",
            task_metrics.duration_histograms(window),
        )
        yield _histogram(
            "queue_wait_seconds",
            f"Submit to first start, of first attempts that finished in the last {window}s.",
            task_metrics.queue_wait_histograms(window),
        )

    def _alerts(self):
        health = alert_health()
        oldest = health.oldest_pending_at
        yield _gauge(
            "alert_outbox_pending", "Alerts written but not yet delivered.", samples=[((), health.pending)]
        )
        yield _gauge(
            "alert_outbox_failed", "Alerts whose delivery was given up.", samples=[((), health.failed)]
        )
        yield _gauge(
            "alert_outbox_oldest_pending_seconds",
            "Age of the oldest undelivered alert (0: none).",
            samples=[((), max(time.time() - oldest.timestamp(), 0.0) if oldest else 0.0)],
        )
        yield _gauge(
            "alert_last_error_timestamp_seconds",
            "When a channel last refused or failed a send (0: never).",
            samples=[((), _timestamp(health.last_error_at))],
        )
        yield _gauge(
            "alert_last_errcode",
            "The channel's error code of that failure (-1: none; 0 is never recorded).",
            samples=[((), health.last_errcode if health.last_errcode is not None else -1)],
        )
        yield _gauge(
            "alert_last_sent_timestamp_seconds",
            "When a message was last delivered (0: never).",
            samples=[((), _timestamp(health.last_sent_at))],
        )
        yield _gauge(
            "alert_channel_failing",
            "1 while a channel's sends fail (one failed and none was delivered after it).",
            ("channel",), [((c.name,), int(c.failing)) for c in health.channels],
        )
        yield _gauge(
            "alert_channel_seconds_since_sent",
            "Seconds since the channel last delivered a message (-1: never).",
            ("channel",),
            [((c.name,), time.time() - c.last_sent_at.timestamp() if c.last_sent_at else -1.0)
             for c in health.channels],
        )

    def _kept(self):
        kept = data_kept()
        yield _gauge(
            "table_rows",
            "Rows each large table holds (PostgreSQL: the planner's estimate); RETENTION_DAYS prunes.",
            ("table",), [((k.table,), k.rows) for k in kept],
        )
        yield _gauge(
            "table_oldest_row_timestamp_seconds",
            "When the oldest row each large table keeps was written (0: empty).",
            ("table",), [((k.table,), _timestamp(k.oldest)) for k in kept],
        )

    def _transport(self):
        overview = queue_overview()
        yield _gauge(
            "redis_up",
            "1 when Redis answered this scrape.",
            samples=[((), 1 if overview["reachable"] else 0)],
        )
        workers = overview["workers"]
        yield _gauge(
            "workers_live",
            "RQ workers registered in Redis (a worker's registration expires when it dies).",
            samples=[((), len(workers))],
        )
        yield _gauge(
            "horses_busy",
            "Work-horses running a job now.",
            samples=[((), sum(1 for w in workers if w["current_job"]))],
        )
        yield _gauge(
            "rq_jobs",
            "RQ jobs per queue and registry (transport only; the task rows are the truth).",
            ("queue", "registry"),
            [
                ((q["name"], registry), q[registry])
                for q in overview["queues"]
                for registry in ("queued", "scheduled", "started", "failed", "deferred")
            ],
        )


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(PipelineCollector())


def _allowed_address(request) -> bool:
    allowed = settings.METRICS_ALLOWED_ADDRESSES
    address = client_ip(request) if allowed else None
    if not address:
        return False
    ip = ipaddress.ip_address(address)
    for entry in allowed:
        try:
            if ip in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue
    return False


def _refuse(status: int, message: str) -> JsonResponse:
    response = JsonResponse({"error": message, "field": None}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = BEARER_CHALLENGE
    return response


@never_cache
def metrics(request):
    if request.method not in ("GET", "HEAD"):
        response = _refuse(405, f"method {request.method} is not allowed here")
        response["Allow"] = "GET, HEAD"
        return response
    header = request.headers.get("Authorization")
    if header is not None:
        scheme, _, raw = header.partition(" ")
        token = authenticate_token(raw.strip()) if scheme.lower() == "bearer" else None
        if token is None:
            return _refuse(401, "invalid or revoked API token")
        if not token.has_scope(ApiScope.METRICS):
            return _refuse(403, f"this API token lacks the scope '{ApiScope.METRICS}'")
    elif not _allowed_address(request):
        return _refuse(
            401, "a bearer API token with the metrics scope, or an address in METRICS_ALLOWED_ADDRESSES"
        )
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
