"""A bulk action's rate: exact at any rate, changeable by an operator while it runs (audited,
in effect within a second), and the died-again watch still pauses a replay running at full speed.

Time is virtual (it moves only when the runner sleeps), so these figures are exact and never
depend on the machine; bench/bulk_paths.py measures the same on the wall clock."""

import pytest
from django.utils import timezone

from deadletters.bulk.control import change_bulk_rate, start_bulk_action
from deadletters.bulk.runner import run_bulk_action
from deadletters.bulk.selection import build_selection
from deadletters.bulk.throttle import CHECK_EVERY_SECONDS, Throttle
from deadletters.models import AuditEntry, BulkAction, BulkActionStatus, DeadLetter
from reports.models import ReportTask, TaskStatus

pytestmark = pytest.mark.django_db


def dead_letters(n: int) -> None:
    tasks = ReportTask.objects.bulk_create(
        ReportTask(
            kind="probe", params={}, status=TaskStatus.DEAD, attempt=3, max_attempts=3, timeout_seconds=300
        )
        for _ in range(n)
    )
    DeadLetter.objects.bulk_create(
        DeadLetter(
            task=task, kind="probe", error_type="E", error_message="boom", attempts=3, fingerprint="f" * 40
        )
        for task in tasks
    )


def start(action: str, rate: float, **kwargs) -> BulkAction:
    bulk, _ = start_bulk_action(
        selection=build_selection(action=action, scope="filter"),
        actor="alice",
        ip_address="10.0.0.1",
        rate_per_second=rate,
        **kwargs,
    )
    return bulk


class VirtualTime:
    """A clock that moves only when the runner sleeps; `on_sleep` plays the world meanwhile."""

    def __init__(self, on_sleep=None):
        self.now = 1000.0
        self.start = self.now
        self.sleeps: list[float] = []
        self.on_sleep = on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep:
            self.on_sleep(self)

    @property
    def elapsed(self) -> float:
        return self.now - self.start


@pytest.mark.parametrize("rate", [10, 100, 1000])
def test_the_throttle_keeps_the_rate_within_5_percent_whatever_the_work_costs(rate):
    vt = VirtualTime()
    throttle = Throttle(rate, clock=vt.clock, sleep=vt.sleep)
    batch = max(1, rate)  # a second of work per batch, as batch_size_for gives
    items = 0
    while items < 20 * rate:
        vt.now += batch * 0.6 / rate  # the batch's own work eats 60 % of its time budget
        items += batch
        throttle.wait(batch, interrupted=lambda: False)

    assert items / vt.elapsed == pytest.approx(rate, rel=0.05)
    assert max(vt.sleeps) <= CHECK_EVERY_SECONDS


def test_a_rate_change_carries_over_what_is_owed_at_the_new_rate():
    vt = VirtualTime()
    throttle = Throttle(10, clock=vt.clock, sleep=vt.sleep)
    assert throttle.delay_for(10) == pytest.approx(1.0)
    throttle.next_due += 1.0  # ten items done, one second owed at 10/s

    throttle.change_rate(100)

    assert throttle.delay_for(0) == pytest.approx(0.1)  # the same ten items owe 0.1 s at 100/s


def test_an_operator_changes_the_rate_of_a_running_bulk_and_it_takes_effect_at_once(settings):
    settings.BULK_ACTION_BATCH_SIZE = 500
    dead_letters(100)
    bulk = start("archive", rate=10)
    changed_at = []

    def operator(vt):
        if not changed_at and vt.elapsed >= 2.0:
            change_bulk_rate(bulk_id=bulk.pk, rate_per_second="100", actor="carol", ip_address="10.0.0.2")
            changed_at.append((vt.elapsed, BulkAction.objects.get(pk=bulk.pk).processed))

    vt = VirtualTime(on_sleep=operator)
    assert run_bulk_action(bulk.pk, clock=vt.clock, sleep=vt.sleep) == BulkActionStatus.COMPLETED

    [(at, done_before)] = changed_at
    assert (at, done_before) == (pytest.approx(2.0), 20)  # two seconds at 10/s
    # The other 80 went at 100/s straight away: 0.8 s more, where 10/s would have needed 8 s.
    assert vt.elapsed == pytest.approx(2.8)
    assert (100 - done_before) / (vt.elapsed - at) == pytest.approx(100, rel=0.05)
    [audit] = AuditEntry.objects.filter(action="bulk_rate")
    assert (audit.actor, audit.ip_address, audit.item_count) == ("carol", "10.0.0.2", 80)
    assert (audit.details["rate_before"], audit.details["rate_per_second"]) == (10, 100)
    assert audit.details["bulk"] == str(bulk.public_id)
    assert BulkAction.objects.get(pk=bulk.pk).rate_per_second == 100


def test_a_pause_during_a_long_sleep_is_seen_within_a_second(settings):
    dead_letters(5)
    bulk = start("discard", rate=0.1)  # one letter every ten seconds
    paused_at = []

    def operator(vt):
        if not paused_at and vt.elapsed >= 2.0:
            BulkAction.objects.filter(pk=bulk.pk).update(status=BulkActionStatus.PAUSED)
            paused_at.append(vt.elapsed)

    vt = VirtualTime(on_sleep=operator)
    assert run_bulk_action(bulk.pk, clock=vt.clock, sleep=vt.sleep) == BulkActionStatus.PAUSED
    assert vt.elapsed - paused_at[0] <= CHECK_EVERY_SECONDS
    assert BulkAction.objects.get(pk=bulk.pk).processed == 1


def test_the_rate_of_a_finished_bulk_or_a_bad_rate_is_refused(settings):
    dead_letters(2)
    bulk = start("archive", rate=50)
    with pytest.raises(Exception, match="rate_per_second: must be between"):
        change_bulk_rate(bulk_id=bulk.pk, rate_per_second="1e9", actor="carol")
    with pytest.raises(Exception, match="rate_per_second: must be a number"):
        change_bulk_rate(bulk_id=bulk.pk, rate_per_second="fast", actor="carol")
    vt = VirtualTime()
    run_bulk_action(bulk.pk, clock=vt.clock, sleep=vt.sleep)
    with pytest.raises(Exception, match="cannot change the rate of a bulk action that is completed"):
        change_bulk_rate(bulk_id=bulk.pk, rate_per_second="5", actor="carol")
    assert BulkAction.objects.get(pk=bulk.pk).rate_per_second == 50
    assert not AuditEntry.objects.filter(action="bulk_rate").exists()


def test_the_died_again_watch_pauses_a_replay_running_at_full_speed(settings):
    settings.BULK_ACTION_BATCH_SIZE = 50
    settings.BULK_REPLAY_PAUSE_MIN_SAMPLE = 20
    dead_letters(3000)
    bulk = start("replay", rate=settings.BULK_ACTION_MAX_RATE, pause_threshold=0.5)

    def workers(vt):
        # The cause is not fixed: every replayed task dies again as soon as a worker runs it.
        ReportTask.objects.filter(status=TaskStatus.PENDING).update(
            status=TaskStatus.DEAD, finished_at=timezone.now()
        )

    vt = VirtualTime(on_sleep=workers)
    assert run_bulk_action(bulk.pk, clock=vt.clock, sleep=vt.sleep) == BulkActionStatus.PAUSED

    bulk.refresh_from_db()
    # 2,000 letters a second: the watch looks once a (virtual) second and stops the run there.
    assert 2000 <= bulk.processed < 3000
    assert bulk.paused_reason.startswith("Paused automatically:")
    assert vt.elapsed == pytest.approx(1.0, abs=0.1)
