"""archive_deadletters as cron runs it: real processes, overlapping runs, SIGKILL half-way."""

import os
import signal
import subprocess
import sys
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.files.storage import storages
from django.utils import timezone

from deadletters.models import AuditEntry, DeadLetter, DeadLetterStatus
from deadletters.services.purge import read_purge_file
from reports.models import TaskStatus
from tests.conftest import BASE_DIR, wait_until
from tests.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)

DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def var_dir(tmp_path, settings):
    """Lock files go under this test's own VAR_DIR (subprocesses get it through subprocess_env)."""
    settings.VAR_DIR = tmp_path / "var"
    settings.VAR_DIR.mkdir()
    return settings.VAR_DIR


def bulk_letters(n, *, status=DeadLetterStatus.OPEN, archived_days_ago=None):
    task = make_task(status=TaskStatus.DEAD, attempt=3)
    created = timezone.now() - 10 * DAY
    archived_at = timezone.now() - archived_days_ago * DAY if archived_days_ago is not None else None
    DeadLetter.objects.bulk_create(
        (
            DeadLetter(
                task=task,
                kind="probe",
                error_type="reports.errors.TransientError",
                error_message=f"boom {i}",
                attempts=3,
                fingerprint="a" * 40,
                created_at=created,
                expire_at=created + 7 * DAY,
                status=status,
                archived_at=archived_at,
            )
            for i in range(n)
        ),
        batch_size=500,
    )


class Run:
    """One `manage.py archive_deadletters` process with its stdout read line by line."""

    def __init__(self, env, *args):
        self.process = subprocess.Popen(
            [sys.executable, str(BASE_DIR / "manage.py"), "archive_deadletters", *args],
            cwd=BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []

    def read_until(self, prefix: str) -> str:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith(prefix):
                return line
        raise AssertionError(f"exited before printing {prefix!r}: {self.lines} {self.process.stderr.read()}")

    def finish(self, timeout=120) -> tuple[int, str, str]:
        out, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, "\n".join(self.lines) + out, err

    def kill(self):
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self.process.stdout.close()
        self.process.stderr.close()


@pytest.fixture
def env(subprocess_env):
    return lambda: dict(subprocess_env(), ARCHIVE_DIR=str(settings.ARCHIVE_DIR))


def counts():
    return {
        status: DeadLetter.objects.filter(status=status).count()
        for status in (DeadLetterStatus.OPEN, DeadLetterStatus.ARCHIVED)
    }


def test_two_overlapping_runs_one_works_the_other_exits_0(env):
    bulk_letters(300)
    first = Run(env(), "--batch-size", "10", "--batch-pause", "0.3", "--verbosity", "2")
    first.read_until("archive batch 1:")  # it holds the lock now, with ~29 batches to go

    second = Run(env(), "--batch-size", "10", "--verbosity", "2")
    code, out, err = second.finish()

    assert code == 0, err
    assert "skipped: another archive_deadletters run holds the lock" in out
    assert "archive batch" not in out
    assert first.process.poll() is None, "the first run should still be working"
    code, out, err = first.finish()
    assert code == 0, err
    assert "archived 300 dead letters in 30 batches" in out
    assert counts() == {"open": 0, "archived": 300}
    assert AuditEntry.objects.get(action="archive").item_count == 300


def test_a_run_killed_half_way_leaves_consistent_data_and_the_next_run_finishes(env):
    bulk_letters(400)
    run = Run(env(), "--batch-size", "10", "--batch-pause", "0.05", "--verbosity", "2")
    run.read_until("archive batch 1:")
    run.kill()

    after_kill = counts()
    assert after_kill["open"] + after_kill["archived"] == 400
    assert 10 <= after_kill["archived"] < 400, after_kill
    assert after_kill["archived"] % 10 == 0, "a batch is all or nothing"
    partial = AuditEntry.objects.get(action="archive")
    assert partial.item_count == after_kill["archived"] and partial.details["complete"] is False
    assert DeadLetter.objects.filter(status="archived", archived_at=None).count() == 0

    code, out, err = Run(env(), "--batch-size", "50").finish()

    assert code == 0, err
    assert f"archived {after_kill['open']} dead letters" in out
    assert counts() == {"open": 0, "archived": 400}
    audits = AuditEntry.objects.filter(action="archive").order_by("id")
    assert sum(a.item_count for a in audits) == 400
    assert audits.last().details["complete"] is True

    code, out, err = Run(env()).finish()
    assert code == 0 and "archived 0 dead letters" in out


def purge_runs() -> list[str]:
    try:
        return sorted(storages["archive"].listdir("")[0])
    except FileNotFoundError:
        return []


def stored_parts(run: str) -> int:
    try:
        return len(storages["archive"].listdir(run)[1])
    except FileNotFoundError:
        return 0


def test_a_purge_killed_half_way_destroys_nothing_without_a_copy(env, report_storage):
    bulk_letters(300, status=DeadLetterStatus.ARCHIVED, archived_days_ago=40)
    ids = set(DeadLetter.objects.values_list("pk", flat=True))
    args = ("--purge-archived-after", "30", "--batch-size", "10", "--verbosity", "2")
    run = Run(env(), *args, "--batch-pause", "0.05")
    run.read_until("purge batch 1:")
    run.kill()

    remaining = set(DeadLetter.objects.values_list("pk", flat=True))
    assert 0 < len(remaining) < 300
    code, out, err = Run(env(), *args).finish()
    assert code == 0, err

    assert not DeadLetter.objects.exists()
    runs = purge_runs()
    assert len(runs) == 2  # one per run
    copied = [row["id"] for run_name in runs for row in read_purge_file(run_name)]  # the killed one's too
    assert set(copied) == ids
    assert len(copied) == len(ids), "no row is copied twice"
    assert ids - remaining <= set(copied), "every row the killed run deleted has a copy"
    assert sum(a.item_count for a in AuditEntry.objects.filter(action="purge")) == 300


def _purge_backend_state() -> str | None:
    """PostgreSQL: the state of the backend holding the archiver's advisory lock (the purge's)."""
    from django.db import connection

    from deadletters.services.archive import _ADVISORY_KEY

    key = _ADVISORY_KEY & 0xFFFFFFFFFFFFFFFF
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.state FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.classid = %s AND l.objid = %s AND l.granted",
            [key >> 32, key & 0xFFFFFFFF],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def test_a_purge_killed_mid_batch_duplicates_nothing_and_the_next_run_finishes_it(env, report_storage):
    """SIGSTOP the purge again and again until it is caught between storing a batch's part and
    committing the delete (more parts than its ledger says), SIGKILL it there."""
    from django.db import connection

    bulk_letters(3000, status=DeadLetterStatus.ARCHIVED, archived_days_ago=40)
    DeadLetter.objects.update(traceback="Traceback (most recent call last):\n  File x, line 1\n" * 20)
    ids = set(DeadLetter.objects.values_list("pk", flat=True))
    args = ("--purge-archived-after", "30", "--batch-size", "100", "--verbosity", "2")
    run = Run(env(), *args)
    ledger = wait_until(lambda: AuditEntry.objects.filter(action="purge").first(), message="the purge ledger")
    run_name = ledger.details["file"]

    def caught_mid_batch() -> bool:
        os.kill(run.process.pid, signal.SIGSTOP)
        committed = AuditEntry.objects.get(pk=ledger.pk).details["parts"]
        inside = stored_parts(run_name) > committed
        if connection.vendor == "postgresql":
            inside = inside and _purge_backend_state() == "idle in transaction"
        if inside:
            run.kill()  # SIGKILL while stopped: it never runs another instruction
            return True
        os.kill(run.process.pid, signal.SIGCONT)
        assert run.process.poll() is None, "the purge finished before it was caught mid-batch"
        return False

    wait_until(caught_mid_batch, interval=0.001, timeout=60, message="the purge to be caught mid-batch")
    killed = AuditEntry.objects.get(pk=ledger.pk)
    committed = killed.details["parts"]
    assert stored_parts(run_name) == committed + 1 and not killed.details["complete"]
    remaining = set(DeadLetter.objects.values_list("pk", flat=True))
    assert len(ids) - len(remaining) == killed.item_count  # what the ledger counts is what is gone

    code, out, err = Run(env(), *args).finish()

    assert code == 0, err
    assert not DeadLetter.objects.exists()
    killed.refresh_from_db()
    assert killed.details["repaired"]["cut"] == 1
    assert stored_parts(run_name) == committed  # cut back to what its ledger committed
    copied = [row["id"] for name in purge_runs() for row in read_purge_file(name)]
    assert len(copied) == len(set(copied)) == len(ids) and set(copied) == ids
    assert sum(a.item_count for a in AuditEntry.objects.filter(action="purge")) == len(ids)


def test_exit_code_is_non_zero_on_a_real_error(env):
    broken = dict(env(), DATABASE_URL="sqlite:////nonexistent-dir/db.sqlite3")

    code, out, err = Run(broken).finish()

    assert code != 0
    assert "Error" in err


def test_lock_does_not_depend_on_redis(env):
    bulk_letters(5)
    no_redis = dict(env(), REDIS_URL="redis://127.0.0.1:1/0")

    code, out, err = Run(no_redis).finish()

    assert code == 0, err
    assert DeadLetter.objects.filter(status="archived").count() == 5
