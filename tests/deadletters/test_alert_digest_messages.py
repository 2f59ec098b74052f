"""A digest that carries a batch summary beside dead letters: the batch is counted as a batch,
its line says how the batch ended, and the header's numbers and words agree (in either
ALERT_LANGUAGE: one language per message)."""

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


def _sixteen_deaths_and_a_batch() -> None:
    for _ in range(16):
        make_death(message="orders API 503")
    batch = ReportBatch.objects.create(name="month-end", total=150, finished_at=timezone.now())
    enqueue_batch_summary_alert(batch=batch, total=150, done=91, dead=59)
    assert Alert.objects.count() == 17


def test_a_batch_summary_in_a_digest_is_not_a_dead_letter_and_has_its_counts(settings):
    settings.DINGTALK_WEBHOOK = ROBOT.webhook
    settings.ALERT_LANGUAGE = "en"
    _sixteen_deaths_and_a_batch()

    title, text = digest_of_every_pending_alert()

    assert "Dead-letter digest: 16 dead letters in 1 group, 1 batch summary" in text
    assert "17 dead letters" not in text and "1 groups" not in text
    assert title == "Dead-letter digest: 16 + 1 batch"
    batch_line = next(line for line in text.splitlines() if "batch summary month-end" in line)
    assert batch_line.endswith("150 tasks, 91 done, 59 dead  ")  # not an empty message


def test_a_chinese_digest_counts_the_batch_summary_as_a_batch(settings):
    settings.DINGTALK_WEBHOOK = ROBOT.webhook
    settings.ALERT_LANGUAGE = "zh-hans"
    _sixteen_deaths_and_a_batch()

    title, text = digest_of_every_pending_alert()

    assert "共 16 条，1 类；1 个批次汇总" in text
    assert title == "报表死信告警汇总：共 16 条 + 1 个批次"
    batch_line = next(line for line in text.splitlines() if "批次汇总 month-end" in line)
    assert batch_line.endswith("任务 150，成功 91，死信 59  ")


def test_a_digest_of_dead_letters_alone_keeps_its_words(settings):
    settings.DINGTALK_WEBHOOK = ROBOT.webhook
    settings.ALERT_LANGUAGE = "en"
    make_death(message="orders API 503")
    make_death(error_type="reports.errors.InvalidParams", message="region missing")

    title, text = digest_of_every_pending_alert()

    assert "Dead-letter digest: 2 dead letters in 2 groups\n" in text
    assert title == "Dead-letter digest: 2"
    settings.ALERT_LANGUAGE = "zh-hans"
    AlertMessage.objects.all().delete()
    Alert.objects.update(message=None)
    title, text = digest_of_every_pending_alert()
    assert "共 2 条，2 类\n" in text and title == "报表死信告警汇总：共 2 条"
