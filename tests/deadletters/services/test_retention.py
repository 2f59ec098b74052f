"""Retention deletes old done and cancelled tasks with their attempts and files, the tasks of
purged letters and old audit entries; it never deletes a file a remaining row points to, keeps
every task a dead letter points to, and leaves no row pointing to a deleted file."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from deadletters.models import Alert, AlertMessage, AlertStatus, AuditEntry, DeadLetter
from deadletters.services.retention import data_kept, data_prune
from reports.models import ReportTask, TaskAttempt, TaskStatus
from reports.outputs import output_storage, store_output
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db


def finished_task(status: str, days_ago: float, tmp_path, *, with_file=True) -> ReportTask:
    task = make_task(status=status, attempt=1, finished_at=timezone.now() - timedelta(days=days_ago))
    TaskAttempt.objects.create(task=task, number=1, started_at=task.finished_at, finished_at=task.finished_at,
                               outcome="done" if status == TaskStatus.DONE else "failed")
    if with_file:
        local = tmp_path / f"{task.public_id}.csv"
        local.write_text("a,b\n1,2\n")
        task.output_file = store_output(local, str(task.public_id), 1)
        task.save(update_fields=["output_file"])
    return task


@pytest.fixture
def retention(settings, media_root):
    settings.RETENTION_DAYS = {"tasks": 30, "alerts": 90, "audit": 400}
    return settings


def test_old_done_and_cancelled_tasks_go_with_their_attempts_files_and_directories(
        retention, media_root, tmp_path):
    old_done = finished_task(TaskStatus.DONE, 31, tmp_path)
    old_cancelled = finished_task(TaskStatus.CANCELLED, 40, tmp_path, with_file=False)
    recent = finished_task(TaskStatus.DONE, 29, tmp_path)
    AuditEntry.objects.create(actor="op", action="cancel", task=old_cancelled)

    result = data_prune(batch_size=1)

    assert {key: result.deleted[key] for key in ("tasks", "attempts", "audit")} == {
        "tasks": 2, "attempts": 2, "audit": 0}
    assert list(ReportTask.objects.values_list("id", flat=True)) == [recent.id]
    assert TaskAttempt.objects.filter(task_id=old_done.id).count() == 0
    storage = output_storage()
    assert not storage.exists(old_done.output_file)
    assert not (media_root / "reports" / str(old_done.public_id)).exists()
    assert storage.exists(recent.output_file)  # a file a remaining row points to stays
    assert AuditEntry.objects.get(action="cancel").task_id is None  # the audit outlives the task


def test_a_task_a_dead_letter_points_to_stays_and_a_purged_letters_task_goes(retention, tmp_path):
    old = timezone.now() - timedelta(days=60)
    kept = make_dead_letter()
    ReportTask.objects.filter(id=kept.task_id).update(finished_at=old)
    replayed_then_done = make_dead_letter(status="replayed")
    ReportTask.objects.filter(id=replayed_then_done.task_id).update(status=TaskStatus.DONE, finished_at=old)
    purged = make_dead_letter()
    ReportTask.objects.filter(id=purged.task_id).update(finished_at=old)
    DeadLetter.objects.filter(id=purged.id).delete()  # as a purge leaves it

    result = data_prune()

    assert result.deleted["tasks"] == 1
    assert set(ReportTask.objects.values_list("id", flat=True)) == {kept.task_id, replayed_then_done.task_id}
    assert not ReportTask.objects.filter(id=purged.task_id).exists()


def test_running_and_retrying_tasks_are_never_deleted_however_old(retention):
    old = timezone.now() - timedelta(days=400)
    for status in (TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.RETRYING):
        make_task(status=status, finished_at=old)
    assert data_prune().deleted["tasks"] == 0
    assert ReportTask.objects.count() == 3


def test_old_audit_entries_go_and_zero_keeps_forever(retention):
    AuditEntry.objects.create(actor="op", action="replay")
    ancient = AuditEntry.objects.create(actor="op", action="replay")
    AuditEntry.objects.filter(id=ancient.id).update(created_at=timezone.now() - timedelta(days=401))
    make_task(status=TaskStatus.DONE, finished_at=timezone.now() - timedelta(days=3000))

    retention.RETENTION_DAYS = {"tasks": 0, "alerts": 0, "audit": 0}
    assert set(data_prune().deleted.values()) == {0}

    retention.RETENTION_DAYS = {"tasks": 0, "alerts": 0, "audit": 400}
    assert data_prune().deleted["audit"] == 1
    assert AuditEntry.objects.count() == 1 and ReportTask.objects.count() == 1


def test_the_command_dry_run_counts_and_deletes_nothing(retention, tmp_path):
    task = finished_task(TaskStatus.DONE, 31, tmp_path)
    out, err = StringIO(), StringIO()
    call_command("prune_data", "--dry-run", stdout=out, stderr=err)
    assert "tasks: would delete 1" in out.getvalue() and "attempts: would delete 1" in out.getvalue()
    assert ReportTask.objects.filter(id=task.id).exists() and output_storage().exists(task.output_file)

    out = StringIO()
    call_command("prune_data", stdout=out, stderr=StringIO())
    assert "tasks: deleted 1" in out.getvalue()
    assert not ReportTask.objects.filter(id=task.id).exists()


def test_sent_alerts_and_their_messages_go_and_pending_ones_stay(retention):
    letter = make_dead_letter()
    old = timezone.now() - timedelta(days=91)
    sent = AlertMessage.objects.create(channel="dingtalk", status=AlertStatus.SENT, created_at=old)
    waiting = AlertMessage.objects.create(channel="dingtalk", status=AlertStatus.PENDING, created_at=old)
    Alert.objects.create(dead_letter=letter, channel="dingtalk", status=AlertStatus.SENT, message=sent,
                         created_at=old)
    Alert.objects.create(dead_letter=letter, channel="dingtalk", status=AlertStatus.PENDING, message=waiting,
                         created_at=old)
    recent = AlertMessage.objects.create(channel="dingtalk", status=AlertStatus.SENT)

    deleted = data_prune().deleted

    assert (deleted["alerts"], deleted["alert messages"]) == (1, 1)
    assert set(AlertMessage.objects.values_list("id", flat=True)) == {waiting.id, recent.id}
    assert list(Alert.objects.values_list("status", flat=True)) == [AlertStatus.PENDING]


def test_the_dashboard_and_metrics_show_each_tables_size_and_oldest_row(
    retention, admin_client, api_token, client
):
    task = make_task(status=TaskStatus.DONE, finished_at=timezone.now())
    ReportTask.objects.filter(pk=task.pk).update(created_at=timezone.now() - timedelta(days=12))
    kept = {k.table: k for k in data_kept()}
    assert kept["tasks"].oldest.date() == (timezone.now() - timedelta(days=12)).date()
    assert kept["audit entries"].oldest is None

    page = admin_client.get("/console/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "保留的数据" in page and "审计记录" in page

    metrics = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {api_token}").content.decode()
    name = 'report_table_oldest_row_timestamp_seconds{table="tasks"}'
    oldest = [line for line in metrics.splitlines() if line.startswith(name)]
    assert float(oldest[0].split()[-1]) == pytest.approx(kept["tasks"].oldest.timestamp())
    assert 'report_table_rows{table="audit entries"} 0.0' in metrics
