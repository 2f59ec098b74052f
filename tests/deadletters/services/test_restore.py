"""manage.py restore_purge after a real purge (archive_deadletters --purge-archived-after): the
letters come back archived with their fields, a second run restores nothing twice, a damaged or
missing part exits non-zero with nothing of it loaded, --dry-run writes nothing, a task that is
gone is made again, and the restore is audited."""

import gzip
import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from deadletters.models import AuditEntry, DeadLetter, DeadLetterStatus
from deadletters.services.purge import part_name
from deadletters.services.replay import replay_dead_letter
from deadletters.services.restore import BadPart, parse_line
from reports.models import ReportTask, TaskAttempt, TaskStatus
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)
FIELDS = (
    "id", "task_id", "kind", "params", "error_type", "error_message", "traceback", "attempts",
    "fingerprint", "status", "created_at", "expire_at", "replayed_at", "replayed_by", "discarded_at",
)  # fmt: skip


@pytest.fixture(autouse=True)
def var_dir(tmp_path, settings):
    settings.VAR_DIR = tmp_path / "var"
    settings.VAR_DIR.mkdir()


def archived_letters(n: int, *, per_task: int = 1, **fields) -> list[DeadLetter]:
    """n letters archived 40 days ago, `per_task` of them sharing each task."""
    created = timezone.now() - 50 * DAY
    letters, task = [], None
    for i in range(n):
        if i % per_task == 0:
            task = make_task(kind="sales_summary" if i % 2 else "probe", status=TaskStatus.DEAD, attempt=3,
                             params={"region": f"r{i}", "ünï": [1, 2]})  # fmt: skip
        letters.append(
            make_dead_letter(
                task=task,
                created_at=created + i * timedelta(minutes=1),
                error_message=f"boom {i % 3}\nline two",
                replayed_by="ann" if i == 2 else "",
                **fields,
            )  # fmt: skip
        )
    DeadLetter.objects.filter(pk__in=[dl.pk for dl in letters]).update(
        status=DeadLetterStatus.ARCHIVED, archived_at=timezone.now() - 40 * DAY
    )
    return letters


def snapshot() -> dict[int, dict]:
    return {row["id"]: row for row in DeadLetter.objects.values(*FIELDS)}


def purge(batch_size: int = 4) -> str:
    out = StringIO()
    call_command(
        "archive_deadletters", "--purge-archived-after", "30", "--batch-size", str(batch_size), stdout=out
    )
    [ledger] = AuditEntry.objects.filter(action="purge")
    return ledger.details["file"]


def restore(run: str, *args: str) -> str:
    out = StringIO()
    call_command("restore_purge", run, "--actor", "ops-ann", *args, stdout=out, stderr=out)
    return out.getvalue()


def damage(name: str, *, at: float = 0.5) -> None:
    """Flip one byte of a stored part, in its compressed data (not the header)."""
    storage = storages["archive"]
    with storage.open(name, "rb") as stored:
        data = bytearray(stored.read())
    data[max(int(len(data) * at), 12)] ^= 0x01
    storage.delete(name)
    storage.save(name, ContentFile(bytes(data)))


def test_a_purged_run_comes_back_archived_with_its_fields_once(report_storage):
    letters = archived_letters(10, per_task=2)
    before = snapshot()
    run = purge()
    assert not DeadLetter.objects.exists()
    ledger = AuditEntry.objects.get(action="purge")
    assert len(ledger.details["sha256"]) == ledger.details["parts"] == 3

    started = timezone.now()
    out = restore(run, "--verbosity", "2")

    assert snapshot() == before  # every field as it was, the status archived
    assert all(
        started <= archived_at <= timezone.now()
        for archived_at in DeadLetter.objects.values_list("archived_at", flat=True)
    )
    assert "restored 10 dead letters" in out and "3 of 3 parts loaded" in out
    assert out.count("parts: ") == 3  # a progress line per part at verbosity 2
    [audit] = AuditEntry.objects.filter(action="restore_purge")
    assert audit.actor == "ops-ann" and audit.source == "cli" and audit.item_count == 10
    assert audit.details["run"] == run and audit.details["complete"] and audit.details["restored"] == 10
    assert audit.details["purge_ledger"] == ledger.pk and audit.details["checksums"]

    again = restore(run)

    assert DeadLetter.objects.count() == 10 and snapshot() == before
    assert "restored 0 dead letters" in again and "10 were already present" in again
    assert AuditEntry.objects.filter(action="restore_purge").count() == 2
    assert ReportTask.objects.count() == 5  # the tasks were never gone: none made again
    assert {dl.pk for dl in letters} == set(before)


def test_a_flipped_byte_fails_its_part_and_loads_nothing_of_it(report_storage):
    archived_letters(12)
    before = snapshot()
    run = purge()
    with storages["archive"].open(part_name(run, 2), "rb") as stored:
        damaged_ids = {
            json.loads(line)["id"] for line in gzip.decompress(stored.read()).decode().splitlines()
        }
    damage(part_name(run, 2))

    with pytest.raises(CommandError) as failed:
        restore(run)

    assert "part-000002.jsonl.gz does not match the sha256 its purge recorded" in str(failed.value)
    assert set(DeadLetter.objects.values_list("pk", flat=True)) == set(before) - damaged_ids
    assert len(damaged_ids) == 4
    [audit] = AuditEntry.objects.filter(action="restore_purge")
    assert audit.item_count == 8 and audit.details["bad_parts"][0]["part"] == part_name(run, 2)


@pytest.mark.parametrize("at", [0.3, 0.6, 0.97], ids=["deflate data", "later data", "trailer"])
def test_without_a_recorded_checksum_gzip_and_json_checks_catch_the_flip(at):
    """A run purged by an earlier release has no sha256 in its ledger: gzip's CRC-32 and length,
    then the content checks, stand between a damaged part and the table."""
    archived_letters(8)
    run = purge()
    ledger = AuditEntry.objects.get(action="purge")
    AuditEntry.objects.filter(pk=ledger.pk).update(
        details={k: v for k, v in ledger.details.items() if k != "sha256"}
    )
    damage(part_name(run, 1), at=at)

    out = StringIO()
    with pytest.raises(CommandError, match="part-000001.jsonl.gz"):
        call_command("restore_purge", run, "--actor", "ops", stdout=out, stderr=out)

    assert DeadLetter.objects.count() == 4  # part 2 alone
    assert "recorded no checksums" in out.getvalue()


def test_a_missing_part_is_named_and_the_rest_is_restored(report_storage):
    archived_letters(8)
    run = purge()
    storages["archive"].delete(part_name(run, 1))

    with pytest.raises(CommandError, match=r"part-000001.jsonl.gz is missing"):
        restore(run)

    assert DeadLetter.objects.count() == 4


def test_a_dry_run_checks_and_counts_and_writes_nothing():
    archived_letters(6)
    run = purge()
    letters, audits, tasks = (
        DeadLetter.objects.count(),
        AuditEntry.objects.count(),
        ReportTask.objects.count(),
    )

    out = restore(run, "--dry-run")

    assert (
        "dry run of" in out
        and "6 letters would be restored, 0 are already present; 2 of 2 parts intact" in out
    )
    assert (DeadLetter.objects.count(), AuditEntry.objects.count(), ReportTask.objects.count()) == (
        letters,
        audits,
        tasks,
    )


def test_a_task_purged_too_is_made_again_and_its_letter_can_be_replayed(settings):
    [letter] = archived_letters(1)
    task = letter.task
    run = purge()
    TaskAttempt.objects.filter(task=task).delete()
    ReportTask.objects.filter(pk=task.pk).delete()

    out = restore(run)

    made = ReportTask.objects.get(public_id=task.public_id)
    assert made.pk == task.pk and made.status == TaskStatus.DEAD and made.kind == task.kind
    assert made.params == letter.params and made.attempt == 3 and made.owner is None
    assert made.submitted_by == "restore_purge" and made.created_at == letter.created_at
    assert "1 task rows made again" in out
    restored = DeadLetter.objects.get(pk=letter.pk)
    assert restored.task_id == made.pk
    replay_dead_letter(dead_letter_id=restored.pk, actor="ops-ann", ip_address=None)
    assert ReportTask.objects.get(pk=made.pk).status == TaskStatus.PENDING


def test_an_id_held_by_another_letter_is_a_conflict_left_alone():
    [letter] = archived_letters(1)
    run = purge()
    other = make_dead_letter(error_message="someone else")
    DeadLetter.objects.filter(pk=other.pk).update(id=letter.pk)

    with pytest.raises(
        CommandError, match="1 letters were not restored: their ids are held by different dead letters"
    ):
        restore(run)

    assert DeadLetter.objects.get(pk=letter.pk).error_message == "someone else"


def test_letters_made_after_a_restore_get_fresh_ids():
    """Restored ids past the id counter (a restore into another database) move it on."""
    letters = archived_letters(3)
    run = purge()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT setval(pg_get_serial_sequence('deadletters_deadletter', 'id'), 1, false)")
        else:
            cursor.execute("UPDATE sqlite_sequence SET seq = 0 WHERE name = 'deadletters_deadletter'")

    restore(run)
    fresh = make_dead_letter()

    assert fresh.pk > max(dl.pk for dl in letters)


def test_an_unknown_run_or_a_missing_actor_is_an_error():
    with pytest.raises(CommandError, match="no purge run named 'deadletters-nope'"):
        restore("deadletters-nope")
    with pytest.raises(CommandError):
        call_command("restore_purge", "deadletters-nope", stdout=StringIO(), stderr=StringIO())


def test_the_help_explains_what_it_does(capsys):
    with pytest.raises(SystemExit):
        call_command("restore_purge", "--help")
    text = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps at hyphens
    for words in ("archived", "sha256", "restores nothing twice", "--dry-run", "--actor", "non-zero"):
        assert words in text


GOOD = (
    '{"archived_at": "2026-10-01T00:00:00.000000+00:00", "attempts": 3, '
    '"created_at": "2026-09-20T00:00:00.000001+00:00", "discarded_at": null, "error_message": "boom", '
    '"error_type": "E", "expire_at": "2026-09-27T00:00:00.000000+00:00", '
    '"fingerprint": "f", "id": 7, "kind": "probe", "params": {}, "replayed_at": null, "replayed_by": "", '
    '"status": "archived", "task_id": 3, "task_public_id": "6f1c6a3e-0b4e-4a37-9d61-0e6f4ad3c1b2", '
    '"traceback": ""}'
)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (('"id": 7', '"id": true'), "id must be a whole number"),
        (('"id": 7', '"id": -7'), "id must be a whole number"),
        (('"attempts": 3', '"attempts": "3"'), "attempts must be a whole number"),
        (('"kind": "probe"', '"kind": "' + "k" * 65 + '"'), "kind must be text of at most 64"),
        (('"error_type": "E"', '"error_type": "E\\u0000"'), "error_type must be text"),
        (('"params": {}', '"params": []'), "params must be a JSON object"),
        (('"status": "archived"', '"status": "open"'), "a purge exports archived letters only"),
        (('+00:00", "attempts"', '", "attempts"'), "archived_at has no time zone"),
        (
            ('"expire_at": "2026-09-27T00:00:00.000000+00:00"', '"expire_at": null'),
            "expire_at must be a time",
        ),
        (('"task_public_id": "6f1c', '"task_public_id": "zz1c'), "task_public_id is not a UUID"),
        ((', "traceback": ""', ""), "missing traceback"),
        (("{", "["), "not JSON"),
    ],
)
def test_a_line_is_checked_field_by_field(change, why):
    assert parse_line(GOOD, where="p")["id"] == 7
    with pytest.raises(BadPart, match=why):
        parse_line(GOOD.replace(*change, 1), where="p line 1")


def test_a_part_without_a_checksum_may_not_unpack_past_its_bound(monkeypatch):
    """A run purged by an earlier release has no sha256: a part swapped for a gzip bomb (here a
    letter with 8 MiB of traceback, 8 KiB stored) is refused, not unpacked whole."""
    from deadletters.services import restore as restore_module

    monkeypatch.setattr(restore_module, "UNCHECKED_FLOOR", 1024 * 1024, raising=False)
    archived_letters(8)
    run = purge()
    ledger = AuditEntry.objects.get(action="purge")
    unchecked = {k: v for k, v in ledger.details.items() if k != "sha256"}
    AuditEntry.objects.filter(pk=ledger.pk).update(details=unchecked)
    storage = storages["archive"]
    with storage.open(part_name(run, 1), "rb") as stored:
        first = json.loads(gzip.decompress(stored.read()).decode().splitlines()[0])
    storage.delete(part_name(run, 1))
    bomb = json.dumps({**first, "traceback": "a" * 8 * 1024 * 1024}) + "\n"
    storage.save(part_name(run, 1), ContentFile(gzip.compress(bomb.encode())))

    with pytest.raises(CommandError, match=r"part-000001.jsonl.gz unpacks to more than 100 times its size"):
        restore(run)

    assert DeadLetter.objects.count() == 4  # part 2 alone
    assert AuditEntry.objects.get(action="restore_purge").details["complete"]


def test_a_line_nested_too_deep_is_a_bad_part_not_a_crash():
    deep = GOOD.replace('"params": {}', '"params": ' + "[" * 100_000 + "]" * 100_000)
    with pytest.raises(BadPart, match="not JSON"):
        parse_line(deep, where="p line 1")
