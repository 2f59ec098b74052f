"""A kind's circuit breaker (reports/services/breakers.py) through its services: upstream failures
past the threshold open it once (the kind paused by the breaker, audited as the system, one card)
and cost no attempt; a task's own failures still kill it on schedule; the housekeeper's probes and
canary close it, once however many housekeepers run; a hanging probe times out."""

import threading
import time

import pytest
from django.db import connection

from deadletters.models import Alert, AuditEntry, DeadLetter
from reports.kinds import KINDS
from reports.models import BreakerState, KindBreaker, PausedKind, ReportTask, TaskStatus
from reports.services import (
    FailureInfo,
    claim_task,
    complete_task,
    concurrency,
    record_attempt_failure,
    submit_task,
)
from reports.services.breakers import BREAKER, probe, tend_breakers

pytestmark = pytest.mark.django_db(transaction=True)

UPSTREAM = FailureInfo("reports.kinds.outbound.SourceUnreachable", "could not get an HTTP answer",
                       "", retriable=True, origin="upstream")
OWN = FailureInfo("reports.errors.PermanentError", "the records make a table too large", "", retriable=False)


@pytest.fixture(autouse=True)
def uncapped(settings):
    """Claims here are the test's own: no per-kind cap defers them."""
    settings.REPORT_KIND_DEFAULT_CONCURRENCY = 0


def running(n: int, redis_conn) -> list[ReportTask]:
    tasks = [submit_task(kind="http_export", params={}).task for _ in range(n)]
    redis_conn.flushall()
    return [claim_task(task_id=task.pk, attempt=1, worker="test pid 1") for task in tasks]


def fail(task: ReportTask, failure: FailureInfo = UPSTREAM) -> ReportTask:
    record_attempt_failure(task_id=task.pk, attempt=task.attempt, failure=failure)
    return ReportTask.objects.get(pk=task.pk)


def breaker() -> KindBreaker:
    return KindBreaker.objects.get(kind="http_export")


def notices(name: str) -> int:
    return sum(alert.payload.get("notice") == name for alert in Alert.objects.all())


def test_upstream_failures_past_the_threshold_open_the_breaker_once_and_cost_no_attempt(
        upstream_kind, redis_conn):
    first, second, third, fourth, last_try, own = running(6, redis_conn)
    charged = [fail(first), fail(second)]
    assert breaker().state == BreakerState.CLOSED and not PausedKind.objects.exists()
    assert [(t.status, t.max_attempts) for t in charged] == [(TaskStatus.RETRYING, 3)] * 2

    tripping = fail(third)  # the third within the window opens it, and is not charged either
    assert breaker().state == BreakerState.OPEN
    assert PausedKind.objects.get(kind="http_export").paused_by == BREAKER
    assert (tripping.status, tripping.max_attempts, tripping.next_retry_at) == (
        TaskStatus.RETRYING, 4, tripping.updated_at)

    ReportTask.objects.filter(pk=last_try.pk).update(max_attempts=1)  # its last attempt, failing upstream
    assert fail(last_try).status == TaskStatus.RETRYING
    assert fail(fourth).status == TaskStatus.RETRYING
    assert fail(own, OWN).status == TaskStatus.DEAD, "a task's own failure still kills it"
    assert DeadLetter.objects.count() == 1
    opened = AuditEntry.objects.filter(action="breaker_opened")
    assert [(entry.source, entry.actor) for entry in opened] == [("system", "")]
    assert notices("breaker_opened") == 1


def test_an_upstream_failure_of_a_kind_without_an_upstream_is_charged(settings, redis_conn):
    settings.HTTP_EXPORT_URL = ""
    settings.HTTP_EXPORT_ALLOWED_HOSTS = ["127.0.0.1:9"]
    tasks = [submit_task(kind="http_export", params={"url": "http://127.0.0.1:9/"}).task for _ in range(6)]
    for task in tasks:
        claim_task(task_id=task.pk, attempt=1, worker="test pid 1")
        assert fail(ReportTask.objects.get(pk=task.pk)).max_attempts == 3
    assert not KindBreaker.objects.exists() and not PausedKind.objects.exists()


def duty_at_once(times: int = 2) -> list[str]:
    """`times` housekeepers run the duty at the same moment."""
    said, barrier = [], threading.Barrier(times)

    def housekeeper():
        barrier.wait()
        try:
            said.append(tend_breakers())
        finally:
            connection.close()

    threads = [threading.Thread(target=housekeeper) for _ in range(times)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return said


def test_probes_then_a_canary_close_the_breaker_once_however_many_housekeepers(
        upstream_kind, redis_conn, monkeypatch, fast_retries):
    monkeypatch.setattr("reports.services.breakers.SETTLE_SECONDS", 0)
    tasks = running(5, redis_conn)
    for task in tasks:
        fail(task)
    upstream_kind.mode = "down"
    assert "probe failed" in tend_breakers() and breaker().passing_probes == 0

    upstream_kind.mode = "up"
    duty_at_once()  # two probes (each housekeeper's; probed at every pass here)
    while breaker().state == BreakerState.OPEN:
        tend_breakers()
    assert breaker().state == BreakerState.HALF_OPEN and concurrency.limit_for("http_export") == 2
    said = duty_at_once()
    assert sum("canary let through" in line for line in said) == 1, said
    assert not PausedKind.objects.exists()
    jobs = redis_conn.lrange("rq:queue:low", 0, -1)
    assert sorted(jobs) == sorted(f"report-{task.pk}-2".encode() for task in tasks), "each enqueued once"

    for task in tasks[:2]:  # the canary
        claimed = claim_task(task_id=task.pk, attempt=2, worker="test pid 1")
        assert complete_task(task_id=task.pk, attempt=2, output_file="", started_at=claimed.started_at)
    said = duty_at_once()
    assert sum("closed" in line for line in said) == 1, said
    assert breaker().state == BreakerState.CLOSED
    assert concurrency.limit_for("http_export") == concurrency.configured_limit("http_export")
    assert AuditEntry.objects.filter(action="breaker_closed", source="system").count() == 1
    assert (notices("breaker_opened"), notices("breaker_closed")) == (1, 1)


def test_an_upstream_failure_of_the_canary_opens_it_again_without_a_second_card(
        upstream_kind, redis_conn, monkeypatch):
    monkeypatch.setattr("reports.services.breakers.SETTLE_SECONDS", 0)
    for task in running(3, redis_conn):
        fail(task)
    while breaker().state != BreakerState.HALF_OPEN:
        tend_breakers()
    tend_breakers()  # resumed: the canary runs
    canary = ReportTask.objects.filter(kind="http_export").first()
    claim_task(task_id=canary.pk, attempt=2, worker="test pid 1")
    assert fail(ReportTask.objects.get(pk=canary.pk)).status == TaskStatus.RETRYING
    assert breaker().state == BreakerState.OPEN and PausedKind.objects.filter(paused_by=BREAKER).exists()
    assert AuditEntry.objects.filter(action="breaker_reopened").count() == 1
    assert notices("breaker_opened") == 1


def test_a_probe_that_hangs_fails_at_its_timeout(upstream_kind):
    upstream_kind.mode = "hang"
    started = time.monotonic()
    assert probe(KINDS["http_export"]), "no answer is a failed probe"  # its own words, or the fetch's
    assert time.monotonic() - started < 3
    upstream_kind.mode = "up"
    assert probe(KINDS["http_export"]) == ""


def test_every_kind_declares_thresholds_within_bounds():
    from reports.services.breakers import BOUNDS, clean_thresholds

    for kind in KINDS.values():
        declared = {"failures_to_open": kind.breaker_failures, "window_seconds": kind.breaker_window,
                    "probes_to_close": kind.breaker_probes}
        assert clean_thresholds(declared) == declared
        assert kind.breaker_canary >= 1 and 0 < kind.breaker_probe_timeout <= 60
    assert set(BOUNDS) == {"failures_to_open", "window_seconds", "probes_to_close"}


def test_a_canary_cap_left_behind_by_a_lost_lift_is_lifted_by_the_duty(upstream_kind):
    concurrency.override("http_export", 2)  # as if Redis failed when the breaker closed
    assert concurrency.limit_for("http_export") == 2
    tend_breakers()
    assert concurrency.limit_for("http_export") is None
