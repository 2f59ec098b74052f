"""Scheduled bulk runs (and a single letter's scheduled replay, a run of one): the start time is
checked, lives in the database, and the housekeeper promotes it within a second, once, whichever
housekeeper process runs or was killed; a cancelled one never runs. Times are measured from the
database's own timestamps (start_at, started_at), never from sleeps."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from deadletters.bulk.control import cancel_bulk_action
from deadletters.bulk.plans import check_start_at, parse_start_at
from deadletters.bulk.runner import resume_stalled_bulk_actions
from deadletters.bulk.schedule import promote_due_bulk_actions, schedule_letter_replay, scheduled_replays_of
from deadletters.bulk.selection import BulkRequestConflict, InvalidBulkRequest
from deadletters.models import AuditEntry, BulkAction, BulkActionStatus, DeadLetter, DeadLetterStatus
from reports.models import TaskStatus
from reports.services import TaskNotReplayable
from tests.conftest import wait_until
from tests.deadletters.bulk.test_actions import bulk_job_ids, letters, run, start

# The brief's promise is "within 1 s"; the housekeeper polls every 0.5 s. The bound leaves room
# for a loaded 2-core machine and still fails a housekeeper that misses a pass.
LATE_BOUND_SECONDS = 1.5


def soon(seconds: float) -> datetime:
    return timezone.now() + timedelta(seconds=seconds)


def lateness(bulk: BulkAction) -> float:
    return (bulk.started_at - bulk.start_at).total_seconds()


# --- the start time ---------------------------------------------------------------------------


def test_start_times_need_an_offset_a_future_and_at_most_the_horizon(settings):
    now = datetime(2026, 11, 24, 18, 0, tzinfo=UTC)
    settings.BULK_SCHEDULE_MAX_DAYS = 30

    # The shell's example, without seconds: 02:00 in UTC+8 is 18:00 UTC, which is now: refused.
    with pytest.raises(BulkRequestConflict):
        parse_start_at("2026-11-25T02:00+08:00", now=now)
    assert parse_start_at("2026-11-25T03:00+08:00", now=now).astimezone(UTC) == datetime(
        2026, 11, 24, 19, 0, tzinfo=UTC
    )
    assert parse_start_at("2026-11-24T18:00:01Z", now=now) == now + timedelta(seconds=1)
    assert parse_start_at("", now=now) is None and parse_start_at(None, now=now) is None
    for value, error, message in [
        ("2026-11-24T17:59:59Z", BulkRequestConflict, "is in the past"),
        ("2026-11-24T18:00:00Z", BulkRequestConflict, "is in the past"),
        ("2026-12-24T18:00:01Z", BulkRequestConflict, "at most 30 days ahead"),
        ("2026-11-25T02:00", InvalidBulkRequest, "must include its UTC offset"),
        ("tomorrow at two", InvalidBulkRequest, "ISO 8601 date and time with its UTC offset"),
        ("2026-13-01T00:00Z", InvalidBulkRequest, "ISO 8601"),
        ("2026-11-25T25:00+08:00", InvalidBulkRequest, "ISO 8601"),
        (1764000000, InvalidBulkRequest, "ISO 8601"),
    ]:
        with pytest.raises(error, match=message):
            parse_start_at(value, now=now)
    with pytest.raises(InvalidBulkRequest, match="must include its UTC offset"):
        check_start_at(datetime(2026, 11, 25, 2, 0), now=now)


# --- promotion, in this process ------------------------------------------------------------


def test_a_scheduled_run_waits_for_its_time_then_one_promotion_starts_it(
        db, django_capture_on_commit_callbacks):
    made = letters(3)
    bulk = start("replay", start_at=soon(60))

    assert (bulk.status, bulk.started_at) == ("scheduled", None)
    assert bulk_job_ids() == []
    assert AuditEntry.objects.get(action="bulk_replay").details["start_at"] == bulk.start_at.isoformat()
    assert run(bulk) == BulkActionStatus.SCHEDULED  # a job delivered early does nothing
    assert resume_stalled_bulk_actions(stale_after_seconds=0) == []  # nor does the stall sweep
    assert promote_due_bulk_actions(now=bulk.start_at - timedelta(milliseconds=1)) == []

    with django_capture_on_commit_callbacks(execute=True):
        assert promote_due_bulk_actions(now=bulk.start_at) == [bulk.pk]
        assert promote_due_bulk_actions(now=bulk.start_at) == []  # a second housekeeper's pass

    bulk.refresh_from_db()
    assert bulk.status == "pending" and bulk.started_at is not None
    assert len(bulk_job_ids()) == 1
    [entry] = AuditEntry.objects.filter(action="bulk_scheduled_start")
    assert (entry.source, entry.item_count, entry.details["bulk"]) == ("system", 3, str(bulk.public_id))
    assert run(bulk) == BulkActionStatus.COMPLETED
    assert not DeadLetter.objects.filter(pk__in=[x.pk for x in made], status=DeadLetterStatus.OPEN).exists()


def test_cancelled_before_its_time_it_never_starts(db):
    [letter] = letters(1)
    bulk = start("replay", start_at=soon(60))
    cancel_bulk_action(bulk_id=bulk.pk, actor="alice")

    assert promote_due_bulk_actions(now=bulk.start_at + timedelta(hours=1)) == []
    assert BulkAction.objects.get(pk=bulk.pk).status == BulkActionStatus.CANCELLED
    assert DeadLetter.objects.get(pk=letter.pk).status == DeadLetterStatus.OPEN


def test_a_single_letters_scheduled_replay_is_a_run_of_that_letter(db):
    [letter, other] = letters(2)
    bulk, scheduled_letter = schedule_letter_replay(
        dead_letter_id=letter.pk, start_at=soon(300), actor="alice", ip_address="10.0.0.1",
        reason="after deploy",
    )

    assert scheduled_letter == letter
    assert (bulk.action, bulk.status, bulk.selected_ids, bulk.total, bulk.reason) == (
        "replay",
        "scheduled",
        [letter.pk],
        1,
        "after deploy",
    )
    assert list(scheduled_replays_of(letter)) == [bulk]
    assert list(scheduled_replays_of(other)) == []
    DeadLetter.objects.filter(pk=other.pk).update(status=DeadLetterStatus.REPLAYED)
    other.task.__class__.objects.filter(pk=other.task_id).update(status=TaskStatus.PENDING)
    with pytest.raises(TaskNotReplayable):
        schedule_letter_replay(dead_letter_id=other.pk, start_at=soon(300), actor="alice", ip_address=None)


def test_the_one_pass_command_for_cron_starts_due_runs(db, django_capture_on_commit_callbacks):
    letters(1)
    bulk = start("replay", start_at=soon(0.2))
    wait_until(lambda: timezone.now() > bulk.start_at, timeout=5, message="the start time to pass")

    with django_capture_on_commit_callbacks(execute=True):
        call_command("housekeeper", "--once", verbosity=0)

    assert BulkAction.objects.get(pk=bulk.pk).status == BulkActionStatus.PENDING


# --- real housekeeper processes---------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_run_due_in_two_seconds_starts_within_a_second_of_its_time(start_housekeeper, start_worker):
    start_worker()
    start_housekeeper()
    [letter] = letters(1)
    bulk, _ = schedule_letter_replay(dead_letter_id=letter.pk, start_at=soon(2), actor="alice",
                                     ip_address=None)

    started = wait_until(
        lambda: BulkAction.objects.exclude(started_at=None).filter(pk=bulk.pk).first(),
        timeout=30,
        message="the scheduled run to start",
    )

    late = lateness(started)
    print(f"scheduled run started {late:.3f} s after its time")
    assert 0 <= late < LATE_BOUND_SECONDS
    replayed = wait_until(
        lambda: DeadLetter.objects.filter(pk=letter.pk, status=DeadLetterStatus.REPLAYED).first(),
        timeout=30,
        message="the letter to be replayed",
    )
    print(f"the letter was replayed {(replayed.replayed_at - bulk.start_at).total_seconds():.3f} s "
          "after the time")


@pytest.mark.django_db(transaction=True)
def test_a_housekeeper_killed_before_the_time_is_replaced_and_the_run_starts_on_time(start_housekeeper):
    first = start_housekeeper()
    [letter] = letters(1)
    # Room for the next housekeeper's start-up (Django's, a few seconds on a loaded machine).
    bulk, _ = schedule_letter_replay(dead_letter_id=letter.pk, start_at=soon(8), actor="alice",
                                     ip_address=None)
    first.kill()  # SIGKILL: nothing of the schedule was held by it

    start_housekeeper()
    assert timezone.now() < bulk.start_at, "the new housekeeper took longer to start than the test allows"
    assert BulkAction.objects.get(pk=bulk.pk).status == BulkActionStatus.SCHEDULED

    started = wait_until(
        lambda: BulkAction.objects.exclude(started_at=None).filter(pk=bulk.pk).first(),
        timeout=30,
        message="the scheduled run to start under the new housekeeper",
    )
    print(f"after the housekeeper's restart the run started {lateness(started):.3f} s after its time")
    assert 0 <= lateness(started) < LATE_BOUND_SECONDS


@pytest.mark.django_db(transaction=True)
def test_two_housekeepers_start_each_run_once(start_housekeeper, start_worker):
    start_worker()
    housekeepers = [start_housekeeper(), start_housekeeper()]
    made = letters(6)
    due = soon(3)
    runs = [
        schedule_letter_replay(dead_letter_id=letter.pk, start_at=due, actor="alice", ip_address=None)[0]
        for letter in made
    ]

    wait_until(
        lambda: not DeadLetter.objects.filter(pk__in=[x.pk for x in made]).exclude(
            status="replayed").exists(),
        timeout=60,
        message="every scheduled replay to run",
    )

    for bulk in runs:
        assert AuditEntry.objects.filter(action="bulk_scheduled_start",
                                         details__bulk=str(bulk.public_id)).count() == 1
        bulk.refresh_from_db()
        assert 0 <= lateness(bulk) < LATE_BOUND_SECONDS
    for letter in made:
        assert AuditEntry.objects.filter(action="replay", task_id=letter.task_id).count() == 1
    started_by = [len(re.findall(r"scheduled bulk \S+ started", p.output())) for p in housekeepers]
    assert sum(started_by) == 6, started_by


@pytest.mark.django_db(transaction=True)
def test_a_run_cancelled_before_its_time_never_runs(start_housekeeper, start_worker):
    start_worker()
    start_housekeeper()
    cancelled_letter, control_letter = letters(2)
    due = soon(2)
    cancelled, _ = schedule_letter_replay(dead_letter_id=cancelled_letter.pk, start_at=due, actor="alice",
                                          ip_address=None)
    control, _ = schedule_letter_replay(dead_letter_id=control_letter.pk, actor="alice", ip_address=None,
                                        start_at=due + timedelta(milliseconds=200))
    cancel_bulk_action(bulk_id=cancelled.pk, actor="alice")

    # The housekeeper promotes due runs earliest first: once the later one ran, the earlier was seen.
    wait_until(
        lambda: DeadLetter.objects.filter(pk=control_letter.pk, status=DeadLetterStatus.REPLAYED).exists(),
        timeout=30,
        message="the other scheduled replay to run",
    )
    cancelled.refresh_from_db()
    assert (cancelled.status, cancelled.started_at, cancelled.processed) == ("cancelled", None, 0)
    assert DeadLetter.objects.get(pk=cancelled_letter.pk).status == DeadLetterStatus.OPEN
    assert not AuditEntry.objects.filter(action="bulk_scheduled_start",
                                         details__bulk=str(cancelled.public_id)).exists()
    assert AuditEntry.objects.get(action="bulk_cancel").details["bulk"] == str(cancelled.public_id)
