"""Canary replays: the run makes its first k replays and waits; the verdict (as soon as it is
certain, or at the deadline) lets it carry on by itself or stops it as canary_failed, and says why.
The last two tests run it end to end: real workers, a real housekeeper, the probe kind failing or not."""

from datetime import timedelta

import pytest
from django.utils import timezone

from deadletters.bulk.canary import canary_view, decide_canaries
from deadletters.bulk.control import (
    BulkStateConflict,
    cancel_bulk_action,
    pause_bulk_action,
    resume_bulk_action,
)
from deadletters.bulk.selection import BulkRequestConflict, InvalidBulkRequest
from deadletters.models import (
    AuditEntry,
    BulkAction,
    BulkActionStatus,
    CanaryPhase,
    DeadLetter,
    DeadLetterStatus,
)
from reports.models import ReportTask, TaskStatus
from tests.conftest import wait_until
from tests.deadletters.bulk.test_actions import bulk_job_ids, letters, run, start
from tests.factories import make_dead_letter


def canary_tasks(bulk) -> list[ReportTask]:
    return list(ReportTask.objects.filter(dead_letters__replayed_in=bulk).distinct().order_by("pk"))


def die_again(task, *, error_type="requests.exceptions.ConnectionError", message="upstream refused"):
    ReportTask.objects.filter(pk=task.pk).update(status=TaskStatus.DEAD)
    task.refresh_from_db()
    return make_dead_letter(task=task, error_type=error_type, error_message=message)


def waiting_canary(n_letters=10, k=5, share=0.8, **kwargs):
    made = letters(n_letters)
    bulk = start("replay", canary=k, canary_success=share, **kwargs)
    assert bulk.canary_phase == CanaryPhase.PENDING
    assert run(bulk) == BulkActionStatus.CANARY
    bulk.refresh_from_db()
    return bulk, made


def test_the_run_stops_after_its_canary_and_waits_without_holding_a_worker(db):
    bulk, made = waiting_canary(10, k=4)

    assert (bulk.status, bulk.canary_phase, bulk.processed, bulk.succeeded) == ("canary", "running", 4, 4)
    assert bulk.canary_deadline > timezone.now()
    assert DeadLetter.objects.filter(pk__in=[x.pk for x in made], status=DeadLetterStatus.OPEN).count() == 6
    assert len(canary_tasks(bulk)) == 4
    # Running the job again (a duplicate delivery) makes no further replay while it waits.
    assert run(bulk) == BulkActionStatus.CANARY
    assert BulkAction.objects.get(pk=bulk.pk).succeeded == 4
    assert AuditEntry.objects.get(action="bulk_canary_wait").details["replayed"] == 4
    assert decide_canaries() == []  # nothing finished yet: no verdict


def test_enough_done_passes_and_the_run_carries_on_by_itself(db, django_capture_on_commit_callbacks):
    bulk, made = waiting_canary(10, k=5, share=0.8)
    tasks = canary_tasks(bulk)
    # 4 of 5 is 80%
    ReportTask.objects.filter(pk__in=[t.pk for t in tasks[:4]]).update(status=TaskStatus.DONE)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert decide_canaries() == [(bulk.pk, "passed")]
    assert len(callbacks) == 1  # its job, once the verdict commits

    bulk.refresh_from_db()
    assert (bulk.status, bulk.canary_phase) == ("pending", "passed")
    assert bulk.canary_result["done"] == 4 and bulk.canary_result["needed"] == 4
    assert bulk.canary_result["reason"].startswith("Canary passed: 4 of 5")
    assert bulk.filters["watch_since"]  # the canary's own deaths are not counted again by the watch
    assert run(bulk) == BulkActionStatus.COMPLETED
    bulk.refresh_from_db()
    assert (bulk.processed, bulk.succeeded) == (10, 10)
    assert not DeadLetter.objects.filter(pk__in=[x.pk for x in made], status=DeadLetterStatus.OPEN).exists()
    entry = AuditEntry.objects.get(action="bulk_canary_passed")
    assert (entry.source, entry.item_count, entry.details["bulk"]) == ("system", 5, str(bulk.public_id))
    # The verdict stays as it was given, whatever the replays of the rest do afterwards.
    assert canary_view(bulk)["done"] == 4 and canary_view(bulk)["phase"] == "passed"


def test_too_many_deaths_fail_it_as_soon_as_success_is_out_of_reach(db):
    bulk, made = waiting_canary(10, k=5, share=0.8)
    first, second, *rest = canary_tasks(bulk)
    die_again(first)
    assert decide_canaries() == []  # 4 may still succeed
    die_again(second, error_type="KeyError", message="'region'")

    assert decide_canaries() == [(bulk.pk, "failed")]

    bulk.refresh_from_db()
    assert (bulk.status, bulk.canary_phase) == ("canary_failed", "failed")
    assert bulk.finished_at is not None
    result = bulk.canary_result
    assert (result["replayed"], result["died_again"], result["done"], result["unfinished"]) == (5, 2, 0, 3)
    assert result["timed_out"] is False
    assert {c["error_type"] for c in result["causes"]} == {"requests.exceptions.ConnectionError", "KeyError"}
    assert result["reason"].startswith("Canary failed: 2 of 5 replayed tasks died again (")
    assert "at least 4 (80%) had to succeed" in result["reason"]
    # Final: nothing more is replayed, a job finds nothing to do, resume and pause refuse.
    assert run(bulk) == BulkActionStatus.CANARY_FAILED
    assert DeadLetter.objects.filter(pk__in=[x.pk for x in made], status=DeadLetterStatus.OPEN).count() == 5
    with pytest.raises(BulkStateConflict):
        pause_bulk_action(bulk_id=bulk.pk, actor="alice")
    entry = AuditEntry.objects.get(action="bulk_canary_failed")
    assert entry.reason == result["reason"] and entry.details["died_again"] == 2


def test_the_deadline_fails_a_canary_whose_replays_have_not_finished(db, settings):
    bulk, _ = waiting_canary(6, k=3, share=1)
    tasks = canary_tasks(bulk)
    ReportTask.objects.filter(pk=tasks[0].pk).update(status=TaskStatus.DONE)

    assert decide_canaries(now=bulk.canary_deadline - timedelta(seconds=1)) == []
    assert decide_canaries(now=bulk.canary_deadline) == [(bulk.pk, "failed")]

    result = BulkAction.objects.get(pk=bulk.pk).canary_result
    assert (result["done"], result["unfinished"], result["timed_out"]) == (1, 2, True)
    assert "2 unfinished at the deadline" in result["reason"]


def test_cancel_while_it_waits_ends_it_and_no_verdict_follows(db):
    bulk, _ = waiting_canary(6, k=3)
    with pytest.raises(BulkStateConflict):
        pause_bulk_action(bulk_id=bulk.pk, actor="alice")  # waiting replays nothing: cancel instead

    cancel_bulk_action(bulk_id=bulk.pk, actor="alice")
    ReportTask.objects.filter(pk__in=[t.pk for t in canary_tasks(bulk)]).update(status=TaskStatus.DONE)

    assert decide_canaries() == []
    assert BulkAction.objects.get(pk=bulk.pk).status == BulkActionStatus.CANCELLED


def test_a_selection_that_runs_out_early_makes_a_smaller_canary(db):
    made = letters(4)
    bulk = start("replay", canary=4, canary_success=0.5)
    # someone else was first
    DeadLetter.objects.filter(pk=made[0].pk).update(status=DeadLetterStatus.REPLAYED)

    assert run(bulk) == BulkActionStatus.CANARY
    bulk.refresh_from_db()
    assert (bulk.total, bulk.processed, bulk.succeeded) == (4, 3, 3)
    view = canary_view(bulk)
    assert (view["replayed"], view["needed"]) == (3, 2)


def test_pause_and_resume_while_the_canary_is_made_keep_its_size(db):
    letters(8)
    bulk = start("replay", canary=3, rate=1)  # one letter a batch
    assert run(bulk, slice_seconds=0) == "continued"  # one replay made, then the job hands over
    pause_bulk_action(bulk_id=bulk.pk, actor="alice")
    resume_bulk_action(bulk_id=bulk.pk, actor="alice")

    assert run(bulk) == BulkActionStatus.CANARY
    bulk.refresh_from_db()
    assert (bulk.succeeded, bulk.canary_phase) == (3, "running")


def test_a_canary_is_checked_at_the_start(db):
    letters(3)
    with pytest.raises(BulkRequestConflict, match="canary: is 4, but the selection holds only 3"):
        start("replay", canary=4)
    with pytest.raises(InvalidBulkRequest, match="only a replay can start with a canary"):
        start("archive", canary=2)
    for bad in (0, -1, 2.5, "x", True):
        with pytest.raises(InvalidBulkRequest, match="canary: must be a whole number"):
            start("replay", canary=bad)
    for bad in (-0.1, 1.5, "most", float("nan")):
        with pytest.raises(InvalidBulkRequest, match="canary_success: must be a number from 0 to 1"):
            start("replay", canary=2, canary_success=bad)
    assert not BulkAction.objects.exists()
    assert bulk_job_ids() == []


# --- end to end: workers replay, the housekeeper decides ------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_with_the_upstream_still_broken_the_run_stops_after_its_canary_and_says_why(
    start_worker, start_housekeeper, fast_retries
):
    fast_retries.REPORT_MAX_ATTEMPTS = 1  # a replay dies at its first failure
    made = letters(20, params={"fail_attempts": 99})
    bulk = start("replay", canary=5, canary_success=0.8, rate=50)
    start_worker()
    start_worker()
    start_housekeeper()

    final = wait_until(
        lambda: BulkAction.objects.filter(pk=bulk.pk, status=BulkActionStatus.CANARY_FAILED).first(),
        timeout=90,
        message="the canary to fail",
    )

    assert (final.processed, final.succeeded, final.canary_phase) == (5, 5, "failed")
    result = final.canary_result
    assert result["replayed"] == 5 and result["done"] == 0 and result["died_again"] >= 2
    assert result["causes"][0]["error_type"] == "reports.errors.TransientError"
    assert result["reason"].startswith(
        f"Canary failed: {result['died_again']} of 5 replayed tasks died again")
    # The other 15 were never replayed.
    assert DeadLetter.objects.filter(pk__in=[x.pk for x in made], status=DeadLetterStatus.OPEN).count() == 15
    assert AuditEntry.objects.filter(action="bulk_canary_failed").count() == 1


@pytest.mark.django_db(transaction=True)
def test_with_the_upstream_fixed_the_run_passes_its_canary_and_completes_by_itself(
    start_worker, start_housekeeper, fast_retries
):
    made = letters(20, params={"fail_attempts": 0})
    bulk = start("replay", canary=5, canary_success=0.8, rate=50)
    start_worker()
    start_worker()
    start_housekeeper()

    final = wait_until(
        lambda: BulkAction.objects.filter(pk=bulk.pk, status=BulkActionStatus.COMPLETED).first(),
        timeout=120,
        message="the run to pass its canary and complete",
    )

    assert (final.processed, final.succeeded, final.canary_phase) == (20, 20, "passed")
    assert final.canary_result["done"] >= 4 and final.canary_result["died_again"] == 0
    assert not DeadLetter.objects.filter(pk__in=[x.pk for x in made], status=DeadLetterStatus.OPEN).exists()
    actions = list(AuditEntry.objects.filter(action__startswith="bulk_canary").order_by("created_at")
                   .values_list("action", flat=True))
    assert actions == ["bulk_canary_wait", "bulk_canary_passed"]
    wait_until(
        lambda: ReportTask.objects.filter(status=TaskStatus.DONE).count() == 20,
        timeout=60,
        message="every replay to finish",
    )
