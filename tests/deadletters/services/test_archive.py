"""manage.py archive_deadletters in-process: what is archived, what never is, purge files, reruns."""

import gzip
from datetime import timedelta
from io import StringIO

import pytest
from django.core.files.storage import storages
from django.core.management import CommandError, call_command
from django.utils import timezone, translation

from deadletters.audit import record_audit
from deadletters.models import Alert, AuditEntry, DeadLetter, DeadLetterStatus
from deadletters.services.archive import archive_expired_dead_letters, archive_lock
from deadletters.services.purge import purge_archived_dead_letters, read_purge_file
from deadletters.services.replay import replay_task
from reports.models import TaskStatus
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def var_dir(tmp_path, settings):
    """Lock files go under this test's own VAR_DIR (subprocesses get it through subprocess_env)."""
    settings.VAR_DIR = tmp_path / "var"
    settings.VAR_DIR.mkdir()
    return settings.VAR_DIR


def run(*args) -> str:
    out = StringIO()
    call_command("archive_deadletters", *args, stdout=out, stderr=out)
    return out.getvalue()


def expired(n=1, *, kind_task=None, message="boom", **fields):
    """Open letters created 8 days ago, so expire_at (created + 7 days) has passed."""
    created = timezone.now() - 8 * DAY
    return [
        make_dead_letter(
            task=kind_task, created_at=created, expire_at=created + 7 * DAY, error_message=message, **fields
        )
        for _ in range(n)
    ]


def statuses():
    return dict(DeadLetter.objects.values_list("pk", "status"))


def test_archives_expired_open_letters_and_records_one_audit_entry():
    old = expired(3)
    fresh = make_dead_letter()

    out = run()

    assert "archived 3 dead letters in 1 batches" in out
    for letter in old:
        letter.refresh_from_db()
        assert letter.status == DeadLetterStatus.ARCHIVED and letter.archived_at is not None
    fresh.refresh_from_db()
    assert fresh.status == DeadLetterStatus.OPEN and fresh.archived_at is None
    [audit] = AuditEntry.objects.filter(action="archive")
    assert (audit.source, audit.actor, audit.item_count) == ("cron", "archive_deadletters", 3)
    assert audit.details["complete"] is True and audit.details["basis"] == "expire_at"


def test_rerunning_is_a_no_op():
    expired(2)
    run()
    before = list(DeadLetter.objects.order_by("pk").values("pk", "status", "archived_at"))

    out = run()

    assert "archived 0 dead letters" in out
    assert list(DeadLetter.objects.order_by("pk").values("pk", "status", "archived_at")) == before
    assert AuditEntry.objects.filter(action="archive").count() == 1


def test_dry_run_changes_nothing_and_counts_by_kind_and_fingerprint():
    disk = expired(3, message="disk full on /data")
    expired(1, message="timeout after 30 s")
    sales = make_task(kind="sales_summary", status=TaskStatus.DEAD, attempt=1)
    expired(2, kind_task=sales, message="disk full on /data")
    make_dead_letter()
    before = statuses()

    out = run("--dry-run")

    assert statuses() == before
    assert not AuditEntry.objects.exists()
    assert "dry run: would archive 6 dead letters" in out
    lines = out.splitlines()[1:]
    error = "reports.errors.TransientError"
    # Each group shows what the hash means: its error and a sample message.
    assert f"         3  probe                {disk[0].fingerprint}  {error}: disk full on /data" in lines
    assert f"         2  sales_summary        {disk[0].fingerprint}  {error}: disk full on /data" in lines
    assert any(line.endswith(f"{error}: timeout after 30 s") for line in lines)
    assert len(lines) == 3


def test_boundary_expire_at_exactly_now_is_archived_a_microsecond_later_is_not():
    now = timezone.now()
    created = now - 7 * DAY  # exactly DEADLETTER_RETENTION_DAYS ago
    at_boundary = make_dead_letter(created_at=created, expire_at=created + 7 * DAY)
    just_inside = make_dead_letter(
        created_at=created + timedelta(microseconds=1),
        expire_at=created + 7 * DAY + timedelta(microseconds=1),
    )

    result = archive_expired_dead_letters(now=now)

    assert result.count == 1
    assert statuses() == {at_boundary.pk: "archived", just_inside.pk: "open"}


def test_default_expiry_is_created_plus_retention_days(settings):
    settings.DEADLETTER_RETENTION_DAYS = 7
    letter = make_dead_letter()

    assert abs(letter.expire_at - letter.created_at - 7 * DAY) < timedelta(seconds=1)
    assert archive_expired_dead_letters(now=letter.created_at + 7 * DAY - timedelta(seconds=1)).count == 0
    assert archive_expired_dead_letters(now=letter.created_at + 7 * DAY + timedelta(seconds=1)).count == 1


def test_replayed_discarded_and_archived_letters_are_never_touched():
    replayed, discarded, archived = expired(3)
    stamp = timezone.now() - 30 * DAY
    DeadLetter.objects.filter(pk=replayed.pk).update(status=DeadLetterStatus.REPLAYED, replayed_at=stamp)
    DeadLetter.objects.filter(pk=discarded.pk).update(status=DeadLetterStatus.DISCARDED, discarded_at=stamp)
    DeadLetter.objects.filter(pk=archived.pk).update(status=DeadLetterStatus.ARCHIVED, archived_at=stamp)

    run()
    run("--older-than", "0")

    assert statuses() == {replayed.pk: "replayed", discarded.pk: "discarded", archived.pk: "archived"}
    assert DeadLetter.objects.get(pk=archived.pk).archived_at == stamp
    assert not AuditEntry.objects.exists()


def test_older_than_overrides_the_expiry():
    now = timezone.now()
    three_days = make_dead_letter(created_at=now - 3 * DAY)  # expire_at in the future
    one_day = make_dead_letter(created_at=now - DAY)

    run("--older-than", "2")

    assert statuses() == {three_days.pk: "archived", one_day.pk: "open"}
    assert AuditEntry.objects.get(action="archive").details["basis"] == "created_at"


def test_archived_letters_leave_the_api_but_can_still_be_replayed(token_client):
    [letter] = expired(1)
    DeadLetter.objects.filter(pk=letter.pk).update(expire_at=timezone.now() + DAY)  # listed again
    assert len(token_client.get("/report/task/dead-letters").json()["results"]) == 1
    archive_expired_dead_letters(older_than_days=1)

    assert token_client.get("/report/task/dead-letters").json()["results"] == []
    assert DeadLetter.objects.filter(status="archived").count() == 1
    replay_task(task_id=letter.task_id, actor="ops", source="console")
    letter.refresh_from_db()
    assert letter.status == DeadLetterStatus.REPLAYED


def test_batches_print_a_progress_line_each_at_verbosity_2():
    task = make_task(status=TaskStatus.DEAD, attempt=3)
    created = timezone.now() - 9 * DAY
    DeadLetter.objects.bulk_create(
        DeadLetter(
            task=task,
            kind="probe",
            error_type="E",
            attempts=3,
            fingerprint="f" * 40,
            created_at=created,
            expire_at=created + 7 * DAY,
        )
        for _ in range(25)
    )

    out = run("--batch-size", "10", "--verbosity", "2")

    progress = [line for line in out.splitlines() if line.startswith("archive batch")]
    assert progress == [
        "archive batch 1: archived 10 (total 10)",
        "archive batch 2: archived 10 (total 20)",
        "archive batch 3: archived 5 (total 25)",
    ]
    assert DeadLetter.objects.filter(status="archived").count() == 25
    assert AuditEntry.objects.get(action="archive").item_count == 25
    assert run("--verbosity", "0") == ""


@pytest.mark.parametrize(
    "args", [["--batch-size", "0"], ["--older-than", "-1"], ["--purge-archived-after", "x"]]
)
def test_bad_options_are_errors(args):
    with pytest.raises(CommandError):
        call_command("archive_deadletters", *args)


def test_a_held_lock_makes_the_run_exit_quietly_without_work():
    expired(2)

    with archive_lock():
        out = run()

    assert "skipped: another archive_deadletters run holds the lock" in out
    assert DeadLetter.objects.filter(status="open").count() == 2
    assert "archived 2" in run()


# --- purge ------------------------------------------------------------------------------


def archived_letters(n, *, archived_days_ago, **fields):
    letters = expired(n, **fields)
    DeadLetter.objects.filter(pk__in=[dl.pk for dl in letters]).update(
        status=DeadLetterStatus.ARCHIVED, archived_at=timezone.now() - archived_days_ago * DAY
    )
    return letters


def purge_runs() -> list[str]:
    """The purge runs in the archive storage (each a folder of parts)."""
    try:
        return sorted(storages["archive"].listdir("")[0])
    except FileNotFoundError:
        return []


def test_purge_writes_a_readable_export_whose_rows_equal_what_was_deleted(report_storage):
    old = archived_letters(12, archived_days_ago=40, message="line one\nline two ünïcode")
    recent = archived_letters(2, archived_days_ago=5)
    open_old = expired(1)
    alert = Alert.objects.create(dead_letter=old[0], fingerprint=old[0].fingerprint)
    audit = record_audit(action="discard", dead_letter=old[1])
    expected = {
        row["id"]: row
        for row in DeadLetter.objects.filter(pk__in=[dl.pk for dl in old]).values(
            "id",
            "task_id",
            "kind",
            "params",
            "error_type",
            "error_message",
            "traceback",
            "fingerprint",
            "attempts",
        )
    }

    out = run("--purge-archived-after", "30", "--batch-size", "5")

    [run_name] = purge_runs()
    assert run_name.startswith("deadletters-")
    parts = sorted(storages["archive"].listdir(run_name)[1])
    assert parts == ["part-000001.jsonl.gz", "part-000002.jsonl.gz", "part-000003.jsonl.gz"]
    rows = read_purge_file(run_name)
    with storages["archive"].open(f"{run_name}/part-000001.jsonl.gz", "rb") as part:
        assert len(gzip.decompress(part.read()).decode().splitlines()) == 5
    assert sorted(row["id"] for row in rows) == sorted(expected)
    for row in rows:
        assert {k: row[k] for k in expected[row["id"]]} == expected[row["id"]]
        assert row["status"] == "archived" and row["archived_at"] and row["task_public_id"]
    assert not DeadLetter.objects.filter(pk__in=expected).exists()
    assert set(DeadLetter.objects.values_list("pk", flat=True)) == {dl.pk for dl in recent} | {open_old[0].pk}
    assert "purged 12 dead letters in 3 batches" in out and run_name in out
    assert not Alert.objects.filter(pk=alert.pk).exists()
    audit.refresh_from_db()
    assert audit.dead_letter_id is None
    [purge_audit] = AuditEntry.objects.filter(action="purge")
    assert purge_audit.item_count == 12 and purge_audit.details["file"] == run_name
    assert purge_audit.details["parts"] == 3 and purge_audit.details["complete"]


def test_purge_rerun_and_dry_run_write_and_delete_nothing(settings):
    archived_letters(3, archived_days_ago=40)

    dry = run("--purge-archived-after", "30", "--dry-run")
    assert "dry run: would purge 3 dead letters" in dry
    assert DeadLetter.objects.count() == 3
    assert not settings.ARCHIVE_DIR.exists() or not list(settings.ARCHIVE_DIR.iterdir())

    run("--purge-archived-after", "30")
    run("--purge-archived-after", "30")

    assert DeadLetter.objects.count() == 0
    assert len(purge_runs()) == 1
    assert AuditEntry.objects.filter(action="purge").count() == 1


def test_each_purge_run_writes_its_own_file(settings):
    archived_letters(2, archived_days_ago=40)
    first = purge_archived_dead_letters(older_than_days=30)
    archived_letters(3, archived_days_ago=40)
    second = purge_archived_dead_letters(older_than_days=30)

    assert first.file != second.file
    assert (len(read_purge_file(first.file)), len(read_purge_file(second.file))) == (2, 3)


def test_the_command_prints_in_the_language_it_runs_in(var_dir, settings):
    """LANGUAGE_CODE (or an active language) decides the output: an operator may run it in Chinese."""
    expired(2)
    with translation.override("zh-hans"):
        dry = run("--dry-run")
        done = run()
    assert "演练：将归档 2 条死信" in dry and "dry run" not in dry
    assert "已归档 2 条死信，共 1 批" in done
    assert "dry run: would archive 0 dead letters" in run("--dry-run")
