"""An upstream outage meets real worker processes: http_export's default source (a local server)
goes down with tasks in flight and more are submitted during it. No task dies of it: the breaker
opens once (the kind paused, one card), the housekeeper's duty probes it, lets a canary through
under a cap of 2, closes it once (one card), and every task is done, high priority first."""

import pytest
from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext

from deadletters.alerts.sender import send_due_alerts
from deadletters.models import AuditEntry, DeadLetter
from reports.models import (
    AttemptOutcome,
    BreakerState,
    KindBreaker,
    PausedKind,
    ReportTask,
    TaskAttempt,
    TaskStatus,
)
from reports.services import submit_task
from reports.services.breakers import tend_breakers
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "SECfake-robot-secret-9f8e7d6c5b4a"


def state() -> str:
    return KindBreaker.objects.get(kind="http_export").state


def submit(n: int) -> list[int]:
    return [submit_task(kind="http_export", params={}, priority="high" if i % 2 else "low").task.pk
            for i in range(n)]


def most_at_once(attempts) -> int:
    """The most of these (started_at, finished_at) attempts that ran at one moment."""
    moments = sorted([(a.started_at, 1) for a in attempts] + [(a.finished_at, -1) for a in attempts],
                     key=lambda m: (m[0], m[1]))
    running = most = 0
    for _, step in moments:
        running += step
        most = max(most, running)
    return most


def test_an_outage_pauses_the_kind_and_kills_nothing(upstream_kind, start_worker, fast_retries,
                                                     fake_dingtalk):
    robot = fake_dingtalk(secret=SECRET)
    upstream_kind.mode = "hold"
    start_worker(HTTP_EXPORT_URL=upstream_kind.url, HTTP_EXPORT_ALLOWED_HOSTS=upstream_kind.host_port,
                 REPORT_WORKER_CONCURRENCY=2, DINGTALK_WEBHOOK=robot.webhook, DINGTALK_SECRET=SECRET,
                 CONSOLE_BASE_URL="https://console.example.invalid")
    before = submit(8)
    wait_until(lambda: upstream_kind.held >= 2, message="two fetches in flight")
    upstream_kind.release(then="down")
    wait_until(lambda: state() == BreakerState.OPEN, message="the breaker to open")
    during = submit(8)
    ids = before + during
    wait_until(lambda: not ReportTask.objects.filter(pk__in=ids, status=TaskStatus.RUNNING).exists()
               and PausedKind.objects.filter(kind="http_export").exists(), message="every task to wait")
    assert "probe failed" in tend_breakers(), "the upstream is still down"
    assert state() == BreakerState.OPEN

    upstream_kind.mode = "up"
    wait_until(lambda: tend_breakers() and state() == BreakerState.CLOSED, timeout=60, message="it to close")
    wait_until(lambda: ReportTask.objects.filter(pk__in=ids, status=TaskStatus.DONE).count() == len(ids),
               timeout=60, message="every task to be done")

    assert not DeadLetter.objects.exists()
    actions = list(AuditEntry.objects.filter(action__startswith="breaker_").order_by("pk").values_list(
        "action", "source"))
    assert actions == [("breaker_opened", "system"), ("breaker_closed", "system")]
    wait_until(lambda: send_due_alerts() is not None and len(robot.accepted) >= 2, message="the two cards")
    with translation.override(settings.ALERT_LANGUAGE):
        said = [gettext(f"Circuit breaker {change}: %(kind)s") % {"kind": "http_export"}
                for change in ("opened", "closed")]
    assert [received.card.get("title", "") for received in robot.accepted] == said

    breaker = KindBreaker.objects.get(kind="http_export")
    after = TaskAttempt.objects.filter(task_id__in=ids, started_at__gte=breaker.half_open_at,
                                       outcome=AttemptOutcome.SUCCEEDED).select_related("task")
    canary = [attempt for attempt in after if attempt.started_at < breaker.changed_at]
    assert 2 <= len(canary) and most_at_once(canary) <= 2, "a canary of 2 at once before it closed"
    order = [attempt.task.priority for attempt in sorted(after, key=lambda a: a.started_at)]
    assert order == sorted(order, key=["high", "low"].index), order
