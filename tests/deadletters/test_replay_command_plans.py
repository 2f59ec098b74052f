"""`manage.py replay_deadletters` with --at (schedule and return) and --canary (follow the canary,
say what its replays did, exit non-zero when it fails)."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from deadletters.models import AuditEntry, BulkAction, DeadLetter, DeadLetterStatus
from tests.deadletters.bulk.test_actions import letters
from tests.factories import make_dead_letter

pytestmark = pytest.mark.django_db


def run(*args):
    out = io.StringIO()
    call_command("replay_deadletters", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_at_schedules_a_filtered_replay_and_returns():
    letters(3)
    when = (timezone.now() + timedelta(hours=6)).replace(microsecond=0)

    out = run("--kind", "probe", "--at", when.isoformat(), "--reason", "after the deploy", "--canary", "2")

    bulk = BulkAction.objects.get()
    assert (bulk.status, bulk.start_at, bulk.canary_size, bulk.total) == ("scheduled", when, 2, 3)
    assert f"bulk replay {bulk.public_id} scheduled for {when.isoformat()} (in 5h59m" in out
    assert "canary 2" in out and "Cancel it" in out
    assert AuditEntry.objects.get(action="bulk_replay").source == "cli"
    assert DeadLetter.objects.filter(status=DeadLetterStatus.OPEN).count() == 3


def test_at_with_ids_schedules_one_run_of_those_letters(settings):
    settings.BULK_SCHEDULE_MAX_DAYS = 30
    letter = make_dead_letter()
    when = (timezone.now() + timedelta(days=2)).replace(microsecond=0)

    run("--id", str(letter.pk), "--at", when.isoformat())

    bulk = BulkAction.objects.get()
    assert (bulk.status, bulk.selected_ids, bulk.start_at) == ("scheduled", [letter.pk], when)
    with pytest.raises(CommandError, match="--at may be at most 30 days ahead"):
        run("--id", str(letter.pk), "--at", (timezone.now() + timedelta(days=31)).isoformat())


@pytest.mark.parametrize(
    "args, message",
    [
        (["--at", "2020-11-25T02:00+08:00"], "--at 2020-11-25T02:00:00+08:00 is in the past"),
        (["--at", "2030-11-25T02:00"], "--at must include its UTC offset"),
        (["--at", "at two"], "--at must be an ISO 8601 date and time"),
        (["--canary", "0"], "--canary must be a whole number from 1 to"),
        (["--canary", "two"], "--canary must be a whole number"),
        (["--canary", "4"], "--canary is 4, but the selection holds only 3"),
        (["--canary", "2", "--canary-success", "1.5"], "--canary-success must be a number from 0 to 1"),
        (["--canary-success", "0.5"], "--canary-success goes with --canary K"),
    ],
)
def test_bad_plans_are_refused_with_the_option_named(args, message):
    letters(3)
    with pytest.raises(CommandError) as refused:
        run("--kind", "probe", *args)
    assert message in str(refused.value)
    assert not BulkAction.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_failing_canary_is_followed_and_exits_non_zero_with_why(start_worker, start_housekeeper,
                                                                  fast_retries):
    fast_retries.REPORT_MAX_ATTEMPTS = 1
    # Each replay takes 4 s before it dies: longer than the command's 2 s between progress lines.
    letters(9, params={"fail_attempts": 99, "sleep_seconds": 4})
    start_worker()
    start_housekeeper()
    out = io.StringIO()

    with pytest.raises(CommandError) as failed:
        call_command(
            "replay_deadletters", "--kind", "probe", "--canary", "3", "--canary-success", "1",
            "--reason", "retry",
            stdout=out, stderr=io.StringIO(),
        )

    printed = out.getvalue()
    assert "canary of 3 first (100% must succeed)" in printed
    assert ("canary: 0 of 3 replayed tasks done, 0 died again, 3 unfinished (3 must be done; decided by"
            in printed)
    assert "canary_failed: 3 of 9 (33%), 3 replayed; Canary failed:" in printed
    assert "the bulk replay ended canary_failed: Canary failed:" in str(failed.value)
    assert "had to succeed. The rest of the selection was not replayed." in str(failed.value)
    assert DeadLetter.objects.filter(status=DeadLetterStatus.OPEN, replayed_in=None).count() >= 6
