"""A digest that carries a batch summary beside dead letters: the batch is counted as a batch,
its line says how the batch ended, and the header's numbers and words agree."""

import pytest
from django.utils import timezone

from deadletters.alerts.client import RobotConfig
from deadletters.alerts.messages import render_digest
from deadletters.alerts.outbox import enqueue_batch_summary_alert
from deadletters.alerts.sender import digest_groups
from deadletters.models import Alert, AlertMessage
from reports.models import ReportBatch
from tests.conftest import make_death

pytestmark = pytest.mark.django_db

ROBOT = RobotConfig(webhook="https://robot.invalid/")


def digest_of_every_pending_alert() -> tuple[str, str]:
    message = AlertMessage.objects.create(title="digest", body={}, is_digest=True)
    total = Alert.objects.filter(message__isnull=True).update(message=message)
    title, body = render_digest(digest_groups(message), total=total, robot=ROBOT, max_groups=10)
    return title, body["actionCard"]["text"]


def test_a_batch_summary_in_a_digest_is_not_a_dead_letter_and_has_its_counts(settings):
    settings.DINGTALK_WEBHOOK = ROBOT.webhook
    for _ in range(16):
        make_death(message="orders API 503")
    batch = ReportBatch.objects.create(name="month-end", total=150, finished_at=timezone.now())
    enqueue_batch_summary_alert(batch=batch, total=150, done=91, dead=59)
    assert Alert.objects.count() == 17

    title, text = digest_of_every_pending_alert()

    assert "Dead-letter digest: 16 dead letters in 1 group, 1 batch summary" in text
    assert "共 16 条，1 类；1 个批次汇总" in text
    assert "17 dead letters" not in text and "1 groups" not in text
    assert title == "报表死信告警汇总 Dead-letter digest: 16 + 1 批次 batch"
    batch_line = next(line for line in text.splitlines() if "batch summary month-end" in line)
    assert batch_line.endswith("150 tasks, 91 done, 59 dead)  ")  # not an empty message


def test_a_digest_of_dead_letters_alone_keeps_its_words(settings):
    settings.DINGTALK_WEBHOOK = ROBOT.webhook
    make_death(message="orders API 503")
    make_death(error_type="reports.errors.InvalidParams", message="region missing")

    title, text = digest_of_every_pending_alert()

    assert "Dead-letter digest: 2 dead letters in 2 groups\n" in text and "共 2 条，2 类\n" in text
    assert title == "报表死信告警汇总 Dead-letter digest: 2"
