"""Supersession: the housekeeper's duty marks an open letter whose report a later task of the same
kind, params and client finished `done`; nothing else (another client, other params, an earlier
or unfinished task) supersedes it."""

import pytest

from deadletters.filters import filtered_dead_letters, parse_dead_letter_filters
from deadletters.housekeeping import DUTIES
from deadletters.models import AuditEntry, DeadLetter, DeadLetterStatus, OpenLetterCount
from reports.models import ReportTask, TaskStatus
from reports.services.batches import submit_batch
from reports.services.submission import submit_task
from reports.services.tokens import create_api_token
from tests.factories import make_dead_letter

pytestmark = pytest.mark.django_db
PARAMS = {"fail_attempts": 5}


def submitted(params=PARAMS, *, status=TaskStatus.DONE, owner=None) -> ReportTask:
    task = submit_task(kind="probe", params=params, owner=owner).task
    ReportTask.objects.filter(pk=task.pk).update(status=status, attempt=3 if status == TaskStatus.DEAD else 1)
    return ReportTask.objects.get(pk=task.pk)


def dead_letter(params=PARAMS, *, owner=None) -> DeadLetter:
    return make_dead_letter(task=submitted(params, status=TaskStatus.DEAD, owner=owner))


def supersede() -> str:
    return next(duty for duty in DUTIES if duty.name == "supersession").run()


def open_count() -> int:
    return sum(OpenLetterCount.objects.values_list("count", flat=True))


def test_a_later_done_task_of_the_same_report_supersedes_the_letter():
    letter = dead_letter()
    again = dead_letter()  # the same report died twice: both are moot once one run is done
    assert open_count() == 2
    batch = submit_batch(items=[{"kind": "probe", "params": {"fail_attempts": 5}}])[0]
    later = batch.tasks.get()  # a batch's task is the same report as a single one
    ReportTask.objects.filter(pk=later.pk).update(status=TaskStatus.DONE)
    assert supersede() == "2 superseded"
    letter.refresh_from_db()
    assert (letter.status, letter.superseded_by_id) == (DeadLetterStatus.SUPERSEDED, later.pk)
    assert DeadLetter.objects.get(pk=again.pk).superseded_by_id == later.pk
    # Not open: neither counted by the triggers nor listed by the default filter.
    assert open_count() == 0
    assert not filtered_dead_letters(parse_dead_letter_filters({})).exists()
    entry = AuditEntry.objects.get(action="supersede")
    assert (entry.actor, entry.source, entry.item_count) == ("", "system", 2)
    assert supersede() == "0 superseded"  # a second housekeeper finds nothing left to mark


def test_other_clients_params_earlier_or_unfinished_tasks_supersede_nothing():
    client = create_api_token(name="client", scopes=("submit",))[0]
    earlier_done = submitted()
    letters = [dead_letter(), dead_letter(owner=client), dead_letter({"fail_attempts": 6})]
    submitted(owner=create_api_token(name="another", scopes=("submit",))[0])  # the same params
    submitted({"fail_attempts": 7})
    submitted(status=TaskStatus.RUNNING)
    submitted(owner=client, status=TaskStatus.DEAD)
    assert earlier_done.params_digest == letters[0].task.params_digest
    assert supersede() == "0 superseded"
    assert set(DeadLetter.objects.values_list("status", flat=True)) == {DeadLetterStatus.OPEN}


def test_the_walk_goes_batch_by_batch():
    from deadletters.services.supersession import letters_supersede

    for i in range(5):
        dead_letter({"fail_attempts": i})
    for i in (0, 2, 4):
        submitted({"fail_attempts": i})
    assert letters_supersede(batch_size=2) == 3
    assert [letter.status for letter in DeadLetter.objects.order_by("pk")] == [
        "superseded", "open", "superseded", "open", "superseded"]
    # One audit entry per batch that marked something, each counting its letters.
    entries = AuditEntry.objects.filter(action="supersede").values_list("item_count", flat=True)
    assert list(entries) == [1, 1, 1]
