"""GET /metrics: who may scrape it, and every number read back by Prometheus' own text parser
equals what the database holds."""

from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from deadletters.models import Alert, AlertStatus, BulkAction, DeadLetter, DeadLetterStatus
from reports.kinds import KINDS
from reports.models import ApiScope, AttemptOutcome, ReportTask, TaskAttempt, TaskCounter, TaskStatus
from reports.services import cancel_task
from reports.services.tokens import create_api_token
from tests.deadletters.alerts.test_alert_path import failing_channel
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db


def scrape(client, token=None, **extra) -> dict:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    response = client.get("/metrics", **headers, **extra)
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name, **labels):
    return samples[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def metrics_token(db):
    return create_api_token(name="prometheus", scopes=[ApiScope.METRICS])[1]


def test_a_token_without_the_metrics_scope_or_no_credentials_are_refused(client, metrics_token, settings):
    settings.METRICS_ALLOWED_ADDRESSES = []
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer rpt_not-a-token").status_code == 401
    reader = create_api_token(name="reader", scopes=[ApiScope.READ, ApiScope.SUBMIT])[1]
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {reader}").status_code == 403
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {metrics_token}").status_code == 405
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {metrics_token}").status_code == 200


def test_an_allowed_address_or_network_scrapes_without_a_token(client, settings):
    settings.METRICS_ALLOWED_ADDRESSES = ["10.0.0.0/8", "192.0.2.7"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.8").status_code == 401
    # Without trusted proxies, X-Forwarded-For is the client's word and counts for nothing.
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.8", HTTP_X_FORWARDED_FOR="10.1.2.3").status_code == 401


def test_task_and_dead_letter_numbers_match_the_database(client, metrics_token, settings):
    settings.METRICS_TOP_CAUSES = 2
    now = timezone.now()
    for status in (TaskStatus.PENDING, TaskStatus.PENDING, TaskStatus.RETRYING, TaskStatus.RUNNING):
        make_task(status=status, kind="sales_summary")
    finished(kind="sales_summary", ago=timedelta(seconds=5))
    old = make_task(status=TaskStatus.PENDING, priority="low")
    ReportTask.objects.filter(pk=old.pk).update(updated_at=now - timedelta(seconds=300))
    cancel_task(task_id=make_task(kind="probe").pk)
    for i, (message, count) in enumerate([("a", 3), ("b", 2), ("c", 1), ("d", 1)]):
        for _ in range(count):
            make_dead_letter(error_message=f"cause {message}", error_type=f"pkg.Error{i}")
    archived = make_dead_letter(error_message="gone")
    DeadLetter.objects.filter(pk=archived.pk).update(status=DeadLetterStatus.ARCHIVED)
    BulkAction.objects.create(action="replay", status="running")
    Alert.objects.create(status=AlertStatus.PENDING, created_at=now - timedelta(seconds=90))

    samples = scrape(client, metrics_token)

    live = ReportTask.objects.filter(status__in=("pending", "running", "retrying"))
    for kind, status in {(t.kind, t.status) for t in live}:
        expected = ReportTask.objects.filter(kind=kind, status=status).count()
        assert value(samples, "report_tasks", kind=kind, status=status) == expected
    assert not [labels for name, labels in samples if name == "report_tasks" and ("status", "done") in labels]
    assert value(samples, "report_tasks", kind="sales_summary", status="pending") == 2
    assert 299 <= value(samples, "report_queue_oldest_waiting_seconds", queue="low") < 330
    assert value(samples, "report_task_completions_total", kind="sales_summary") == 1
    assert value(samples, "report_task_cancellations_total", kind="probe") == 1
    assert value(samples, "report_task_deaths_total", kind="http_export") == 0
    open_letters = DeadLetter.objects.filter(status=DeadLetterStatus.OPEN).count()
    assert value(samples, "report_dead_letters_open", kind="probe") == open_letters == 7
    causes = {
        labels: v for (name, labels), v in samples.items() if name == "report_dead_letters_open_by_cause"
    }
    assert sorted(causes.values()) == [2, 2, 3]  # the two largest causes, then "other" (1 + 1)
    assert causes[(("error_type", "other"), ("fingerprint", "other"))] == 2
    assert (
        ("error_type", "pkg.Error0"),
        ("fingerprint", DeadLetter.objects.filter(error_type="pkg.Error0").first().fingerprint[:12]),
    ) in causes
    assert value(samples, "report_bulk_runs", action="replay", status="running") == 1
    assert value(samples, "report_alert_outbox_pending") == 1
    assert 89 <= value(samples, "report_alert_outbox_oldest_pending_seconds") < 120
    assert value(samples, "report_alert_last_errcode") == -1
    assert value(samples, "report_redis_up") == 1
    assert value(samples, "report_workers_live") == 0
    for kind in KINDS:
        assert ("report_task_deaths_total", (("kind", kind),)) in samples


def test_an_idle_site_has_every_kind_and_live_status_at_zero(client, metrics_token):
    """A dashboard's kind variable and its task panels read report_tasks: idle, they still have samples."""
    samples = scrape(client, metrics_token)

    tasks = {labels: v for (name, labels), v in samples.items() if name == "report_tasks"}
    statuses = ("pending", "retrying", "running")
    assert tasks == {(("kind", kind), ("status", status)): 0 for kind in KINDS for status in statuses}


def finished(*, kind="http_export", ago: timedelta):
    task = make_task(kind=kind, status=TaskStatus.DONE, attempt=1)
    at = timezone.now() - ago
    TaskAttempt.objects.create(
        task=task,
        number=1,
        started_at=at,
        finished_at=at,
        outcome=AttemptOutcome.SUCCEEDED,
        duration_seconds=0,
    )
    return task


def test_completions_count_up_to_a_checkpoint_and_never_go_back(client, metrics_token):
    for ago in (timedelta(days=3), timedelta(minutes=10), timedelta(seconds=30)):
        finished(ago=ago)

    def completions():
        return value(scrape(client, metrics_token), "report_task_completions_total", kind="http_export")

    assert completions() == 3
    marker = TaskCounter.objects.get(kind="", event="completions")
    assert marker.counted_through < timezone.now() - timedelta(minutes=4)
    assert TaskCounter.objects.get(kind="http_export", event="completions").count == 2  # the 30 s one is live
    assert completions() == 3  # a second scrape does not count the checkpoint twice
    finished(ago=timedelta(seconds=1))
    TaskCounter.objects.filter(pk=marker.pk).update(counted_through=timezone.now() - timedelta(minutes=20))
    # As it stood 20 minutes ago: only the 3-day-old one counted; the scrape adds the 10-minute-old one.
    TaskCounter.objects.filter(kind="http_export", event="completions").update(count=1)
    assert completions() == 4
    assert TaskCounter.objects.get(kind="http_export", event="completions").count == 2


def test_attempt_histograms_cover_the_recent_window(client, metrics_token, settings):
    settings.METRICS_WINDOW_SECONDS = 600
    now = timezone.now()

    def attempt(duration, *, finished_ago, number=1, waited=1.0):
        task = make_task(kind="http_export", status=TaskStatus.DONE)
        ReportTask.objects.filter(pk=task.pk).update(
            created_at=now - timedelta(seconds=finished_ago + duration + waited)
        )
        started = now - timedelta(seconds=finished_ago + duration)
        TaskAttempt.objects.create(
            task=task,
            number=number,
            started_at=started,
            finished_at=started + timedelta(seconds=duration),
            outcome=AttemptOutcome.SUCCEEDED,
            duration_seconds=duration,
        )

    attempt(0.3, finished_ago=10, waited=0.2)
    attempt(4.0, finished_ago=20, waited=40)
    attempt(50.0, finished_ago=30, number=2)  # a retry: in the durations, not in the queue wait
    attempt(1.0, finished_ago=3600)  # outside the window

    samples = scrape(client, metrics_token)

    def bucket(name, le):
        return value(samples, f"report_{name}_bucket", kind="http_export", le=le)

    assert bucket("attempt_duration_seconds", "0.5") == 1
    assert bucket("attempt_duration_seconds", "5.0") == 2
    assert bucket("attempt_duration_seconds", "+Inf") == 3
    assert value(samples, "report_attempt_duration_seconds_gsum", kind="http_export") == pytest.approx(54.3)
    assert bucket("queue_wait_seconds", "0.5") == 1
    assert bucket("queue_wait_seconds", "60.0") == 2
    assert bucket("queue_wait_seconds", "+Inf") == 2
    assert value(samples, "report_queue_wait_seconds_gcount", kind="http_export") == 2


def test_a_channel_whose_sends_fail_is_told_by_name(client, metrics_token, settings):
    failing_channel(settings)
    samples = scrape(client, metrics_token)
    assert value(samples, "report_alert_channel_failing", channel="pager") == 1
    assert value(samples, "report_alert_channel_failing", channel="ops") == 0
    assert 89 <= value(samples, "report_alert_channel_seconds_since_sent", channel="ops") < 120
    assert 3599 <= value(samples, "report_alert_channel_seconds_since_sent", channel="pager") < 3630
