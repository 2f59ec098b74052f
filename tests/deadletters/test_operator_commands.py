"""The shell's replay, export and cancel: --help, what they do, and a non-zero exit on failure."""

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from deadletters.models import AuditEntry, BulkAction, DeadLetter, DeadLetterStatus
from reports.kinds.masking import MASK
from reports.models import ReportTask, TaskStatus
from tests.factories import make_dead_letter, make_task
from tests.secret_kind import API_KEY, CUSTOMER, PARAMS, make_secret_letter, secret_kind  # noqa: F401

pytestmark = pytest.mark.django_db


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.parametrize("command", ["replay_deadletters", "export_deadletters", "cancel_tasks"])
def test_each_command_explains_itself(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        call_command(command, "--help")
    assert exit_.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_export_writes_the_filtered_letters_as_jsonl_and_csv(tmp_path):
    wanted = [make_dead_letter(error_message="disk full") for _ in range(3)]
    make_dead_letter(error_message="other cause")
    archived = make_dead_letter(error_message="disk full")
    DeadLetter.objects.filter(pk=archived.pk).update(status=DeadLetterStatus.ARCHIVED)
    fingerprint = wanted[0].fingerprint

    out, err = run("export_deadletters", "--fingerprint", fingerprint[:12])
    rows = [json.loads(line) for line in out.splitlines()]
    assert [row["id"] for row in rows] == [letter.pk for letter in wanted]
    assert rows[0]["task_id"] == str(wanted[0].task.public_id) and "traceback" not in rows[0]
    assert "3 dead letters exported" in err

    target = tmp_path / "letters.csv"
    run(
        "export_deadletters",
        "--format",
        "csv",
        "--output",
        str(target),
        "--status",
        "all",
        "--q",
        "disk full",
    )
    with target.open() as handle:
        read = list(csv.DictReader(handle))
    assert sorted(int(row["id"]) for row in read) == sorted([letter.pk for letter in wanted] + [archived.pk])


def test_the_csv_export_holds_no_formula_a_spreadsheet_would_run():
    """Error messages and params come from clients and sources: a cell starting with = + - @, a tab
    or a carriage return gets a leading apostrophe; a plain number stays as it is."""
    attacks = ['=HYPERLINK("http://x.invalid","y")', "+1+cmd", "-2+3", "@SUM(A1)", "\t=1", "\r=1"]
    for message in attacks:
        make_dead_letter(error_message=message, error_type="-5", params={"formula": "=1+1"})

    out, _ = run("export_deadletters", "--format", "csv", "--show-params")

    rows = list(csv.DictReader(io.StringIO(out)))
    assert [row["error_message"] for row in rows] == ["'" + message for message in attacks]
    assert {row["error_type"] for row in rows} == {"-5"}
    assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for row in rows for cell in row.values()
                   if cell != "-5")


def test_the_export_masks_params_unless_asked_and_sensitive_ones_always(secret_kind):  # noqa: F811
    make_secret_letter()
    for fmt in ("jsonl", "csv"):
        masked, _ = run("export_deadletters", "--format", fmt)
        shown, _ = run("export_deadletters", "--format", fmt, "--show-params")
        assert CUSTOMER not in masked and API_KEY not in masked and MASK in masked
        assert CUSTOMER in shown and API_KEY not in shown
    assert json.loads(run("export_deadletters")[0])["params"] == {key: MASK for key in PARAMS}


def test_export_fails_loudly_on_a_bad_filter_or_path(tmp_path):
    with pytest.raises(CommandError, match="fingerprint"):
        run("export_deadletters", "--fingerprint", "xyz")
    with pytest.raises(CommandError, match="cannot write"):
        run("export_deadletters", "--output", str(tmp_path / "missing" / "x.jsonl"))


def test_replay_by_id_and_a_failure_exits_non_zero(django_capture_on_commit_callbacks):
    letter = make_dead_letter()
    with django_capture_on_commit_callbacks(execute=True):
        out, _ = run("replay_deadletters", "--id", str(letter.pk), "--reason", "fixed")
    assert "replayed" in out
    assert ReportTask.objects.get(pk=letter.task_id).status == TaskStatus.PENDING
    assert AuditEntry.objects.get(action="replay").source == "cli"
    with pytest.raises(CommandError, match="1 of 1 dead letters not replayed"):
        run("replay_deadletters", "--id", str(letter.pk))


def test_replay_by_filter_dry_run_counts_and_changes_nothing():
    for _ in range(4):
        make_dead_letter(error_message="timeout")
    make_dead_letter(error_message="bad input")

    out, _ = run("replay_deadletters", "--q", "timeout", "--dry-run")

    assert out.strip() == "4 dead letters would be replayed"
    assert not BulkAction.objects.exists()
    assert DeadLetter.objects.filter(status=DeadLetterStatus.OPEN).count() == 5
    with pytest.raises(CommandError, match="narrow the filter"):
        run("replay_deadletters")


def test_replay_by_filter_starts_a_throttled_bulk_replay():
    for _ in range(3):
        make_dead_letter(error_message="timeout")

    out, _ = run(
        "replay_deadletters", "--q", "timeout", "--rate", "5", "--no-wait", "--reason", "upstream back"
    )

    bulk = BulkAction.objects.get()
    assert (bulk.action, bulk.total, bulk.rate_per_second, bulk.reason) == ("replay", 3, 5.0, "upstream back")
    assert f"bulk replay {bulk.public_id} started: 3 dead letters at 5.0/s" in out


def test_cancel_tasks_cancels_and_names_what_it_could_not():
    pending, done = make_task(), make_task(status=TaskStatus.DONE)

    out, _ = run("cancel_tasks", str(pending.public_id), "--reason", "duplicate")
    assert "cancelled" in out and ReportTask.objects.get(pk=pending.pk).status == TaskStatus.CANCELLED
    assert AuditEntry.objects.get(action="cancel").source == "cli"

    err = io.StringIO()
    with pytest.raises(CommandError, match="2 of 2 tasks not cancelled"):
        call_command("cancel_tasks", str(done.public_id), "not-a-uuid", stdout=io.StringIO(), stderr=err)
    assert "it is done" in err.getvalue() and "no such task" in err.getvalue()


def test_the_commands_speak_language_code(settings, tmp_path):
    """Operators read what the shell prints: with LANGUAGE_CODE=zh-hans every line, the refusals the
    services raise included, is Chinese (ids, kinds and file names as they are)."""
    settings.LANGUAGE_CODE = "zh-hans"
    replayed = make_dead_letter()
    run("replay_deadletters", "--id", str(replayed.pk), "--reason", "first")
    done = make_task(status=TaskStatus.DONE)
    with pytest.raises(CommandError, match="1 条死信中有 1 条未重放"):
        run("replay_deadletters", "--id", str(replayed.pk), "--reason", "again")
    with pytest.raises(CommandError, match="2 个任务中有 2 个未取消"):
        call_command("cancel_tasks", str(done.public_id), "nope", stdout=io.StringIO(),
                     stderr=(err := io.StringIO()))
    assert f"{done.public_id}：无法取消任务 {done.public_id}：它当前已完成" in err.getvalue()
    assert "nope：没有此任务" in err.getvalue()
    out, err = run("export_deadletters", "--status", "all", "--output", str(tmp_path / "letters.jsonl"))
    assert err.strip() == f"已导出 1 条死信到 {tmp_path / 'letters.jsonl'}"
    with pytest.raises(CommandError, match="--created-from：'yesterday' 不是日期"):
        run("export_deadletters", "--created-from", "yesterday")
    with pytest.raises(CommandError, match="请用 --id 指定死信"):
        run("replay_deadletters")
