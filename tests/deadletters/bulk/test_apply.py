"""Set-based bulk batches (deadletters.bulk.apply): the same outcome as the single-letter services
applied letter by letter, in a handful of statements, and never twice under concurrent bulks."""

import threading
from datetime import timedelta
from functools import partial

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from deadletters.bulk.apply import apply_to_batch
from deadletters.bulk.control import start_bulk_action
from deadletters.bulk.runner import run_bulk_action
from deadletters.bulk.selection import build_selection
from deadletters.models import AuditEntry, BulkAction, DeadLetter, DeadLetterStatus
from deadletters.services.letters import DeadLetterNotFound
from deadletters.services.replay import replay_dead_letter
from deadletters.services.transitions import DeadLetterConflict, change_dead_letter
from reports.models import ReportTask, TaskStatus
from reports.services import TaskNotFound, TaskNotReplayable
from tests.factories import make_dead_letter, make_task
from transport.queues import get_queue

PER_LETTER = {
    "replay": replay_dead_letter,
    "archive": partial(change_dead_letter, action="archive"),
    "discard": partial(change_dead_letter, action="discard"),
    "restore": partial(change_dead_letter, action="restore"),
}
SKIPPABLE = (DeadLetterConflict, DeadLetterNotFound, TaskNotReplayable, TaskNotFound)
MISSING_ID = 10**12


def dead_task(**fields):
    return make_task(status=TaskStatus.DEAD, attempt=3, finished_at=timezone.now(), **fields)


def scenario() -> tuple[list[int], list[ReportTask]]:
    """A batch mixing eligible and ineligible letters for every action, in processing order.

    Returns the letter ids to act on (one id never existed) and every task involved."""
    old = timezone.now() - timedelta(days=2)
    ids, tasks = [], []

    def letter(status=DeadLetterStatus.OPEN, *, task=None, task_status=TaskStatus.DEAD, **fields):
        task = task or dead_task()
        if task.status != task_status:
            ReportTask.objects.filter(pk=task.pk).update(status=task_status)
        tasks.append(task)
        made = make_dead_letter(task=task, status=status, **fields)
        stamps = {
            DeadLetterStatus.ARCHIVED: {"archived_at": old},
            DeadLetterStatus.DISCARDED: {"discarded_at": old},
            DeadLetterStatus.REPLAYED: {"replayed_at": old, "replayed_by": "bob"},
        }.get(status, {})
        if stamps:
            DeadLetter.objects.filter(pk=made.pk).update(**stamps)
        return made

    ids.append(letter().pk)  # open, task dead: every action but restore applies
    ids.append(letter().pk)
    ids.append(letter(DeadLetterStatus.REPLAYED, task_status=TaskStatus.PENDING).pk)  # replayed meanwhile
    ids.append(letter(DeadLetterStatus.ARCHIVED).pk)  # archived meanwhile (replay and restore apply)
    ids.append(letter(DeadLetterStatus.DISCARDED).pk)
    ids.append(letter(task_status=TaskStatus.RUNNING).pk)  # task no longer dead
    shared = dead_task()  # two letters of one dead task: an older archived one and the open one
    ids.append(letter(DeadLetterStatus.ARCHIVED, task=shared, created_at=old).pk)
    ids.append(letter(task=shared).pk)
    outside = dead_task()  # a dead task with one letter in the batch and another outside it
    letter(DeadLetterStatus.DISCARDED, task=outside, created_at=old)
    ids.append(letter(task=outside).pk)
    ids.append(MISSING_ID)
    return ids, tasks


def start(action, ids, reason="maintenance"):
    selection = build_selection(action=action, scope="selected", ids=[i for i in ids if i != MISSING_ID])
    bulk, _ = start_bulk_action(
        selection=selection, actor="alice", ip_address="10.0.0.9", reason=reason, rate_per_second=1000
    )
    return bulk


def per_letter(bulk, ids) -> tuple[int, int]:
    """What the landed runner did: each letter through its single-letter service, in a savepoint."""
    succeeded = skipped = 0
    with transaction.atomic():
        for pk in ids:
            try:
                with transaction.atomic():
                    PER_LETTER[bulk.action](
                        dead_letter_id=pk,
                        actor=bulk.actor,
                        ip_address=bulk.ip_address,
                        reason=bulk.reason,
                        bulk=bulk,
                    )
                succeeded += 1
            except SKIPPABLE:
                skipped += 1
    return succeeded, skipped


def as_set(bulk, ids) -> tuple[int, int]:
    with transaction.atomic():
        outcome = apply_to_batch(bulk, ids)
    return outcome.succeeded, outcome.skipped


def observed(ids, tasks, bulk) -> dict:
    """Everything an operator could see afterwards, with ids replaced by their position."""
    letter_ids = sorted(DeadLetter.objects.filter(task__in=tasks).values_list("pk", flat=True))
    position = {pk: n for n, pk in enumerate(letter_ids)}
    task_position = {
        t.pk: n for n, t in enumerate(sorted({t.pk: t for t in tasks}.values(), key=lambda t: t.pk))
    }
    position[MISSING_ID] = "missing"
    now = timezone.now()
    letters = [
        (
            position[d.pk],
            d.status,
            d.replayed_by,
            d.replayed_at is not None,
            d.replayed_in_id == bulk.pk,
            d.archived_at is not None,
            d.discarded_at is not None,
            abs((d.expire_at - now).days),
        )
        for d in DeadLetter.objects.filter(pk__in=letter_ids).order_by("pk")
    ]
    task_rows = [
        (
            task_position[t.pk],
            t.status,
            t.attempt,
            t.max_attempts,
            t.attempts_before_run,
            t.finished_at is None,
        )
        for t in ReportTask.objects.filter(pk__in=task_position).order_by("pk")
    ]
    audits = sorted(
        (
            e.action,
            e.actor,
            e.source,
            e.ip_address,
            e.reason,
            task_position.get(e.task_id),
            position.get(e.dead_letter_id),
            position.get(e.details.get("dead_letter")),
            e.details.get("bulk") == str(bulk.public_id),
        )
        for e in AuditEntry.objects.exclude(action__startswith="bulk_")
    )
    jobs = sorted(
        job_id.rsplit("-", 1)[1]
        for job_id in get_queue("default").get_job_ids()
        if job_id.startswith("report-")
    )
    return {"letters": letters, "tasks": task_rows, "audits": audits, "jobs": jobs}


@pytest.mark.parametrize("action", ["replay", "archive", "discard", "restore"])
def test_a_set_based_batch_gives_exactly_what_letter_by_letter_gave(transactional_db, redis_conn, action):
    results = []
    for apply in (per_letter, as_set):
        ids, tasks = scenario()
        bulk = start(action, ids)
        AuditEntry.objects.filter(action__startswith="bulk_").delete()
        redis_conn.flushall()
        counts = apply(bulk, ids)
        results.append((counts, observed(ids, tasks, bulk)))
        DeadLetter.objects.all().delete()
        AuditEntry.objects.all().delete()
        BulkAction.objects.all().delete()
        ReportTask.objects.all().delete()

    (by_letter_counts, by_letter), (set_counts, by_set) = results
    assert set_counts == by_letter_counts
    assert by_set == by_letter
    expected_succeeded = {"replay": 6, "archive": 5, "discard": 5, "restore": 3}[action]
    assert set_counts == (expected_succeeded, 10 - expected_succeeded)
    if action == "replay":
        # The task of two letters is replayed once; the letter outside the batch is marked too.
        assert len(by_set["jobs"]) == 6 and set(by_set["jobs"]) == {"4"}
        assert sum(1 for row in by_set["letters"] if row[1] == "replayed" and row[4]) == 8


@pytest.mark.parametrize("action", ["replay", "archive"])
def test_a_batch_costs_the_same_few_statements_for_20_or_200_letters(db, action):
    statements = []
    for size in (20, 200):
        ids = [make_dead_letter(task=dead_task()).pk for _ in range(size)]
        bulk = start(action, ids)
        with CaptureQueriesContext(connection) as queries, transaction.atomic():
            assert apply_to_batch(bulk, ids).succeeded == size
        sql = [q["sql"] for q in queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))]
        inserts = [s for s in sql if s.startswith("INSERT")]
        # One INSERT of the audit rows, cut only where the backend caps a statement's parameters
        # (SQLite: 999, so 99 audit rows a statement).
        fields = [f for f in AuditEntry._meta.concrete_fields if not f.primary_key]
        per_insert = connection.ops.bulk_batch_size(fields, [None] * size)
        assert len(inserts) == -(-size // per_insert)
        statements.append(len(sql) - len(inserts))
    assert statements[0] == statements[1] <= 5, statements


@pytest.mark.django_db(transaction=True)
def test_two_bulk_replays_over_overlapping_selections_replay_each_letter_once(redis_conn, settings):
    settings.BULK_ACTION_BATCH_SIZE = 7
    letters = [make_dead_letter(task=dead_task()) for _ in range(60)]
    first = start("replay", [x.pk for x in letters[:40]])
    second = start("replay", [x.pk for x in letters[20:]])
    outcomes, errors = {}, []

    def run(bulk):
        try:
            outcomes[bulk.pk] = run_bulk_action(bulk.pk, slice_seconds=3600)
        except Exception as exc:  # surfaced below: a thread's failure must fail the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(bulk,)) for bulk in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert not errors and set(outcomes.values()) == {"completed"}
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.succeeded + second.succeeded == 60
    assert first.skipped + second.skipped == 20  # the overlap, counted once by whichever came second
    assert (first.processed, second.processed) == (40, 40)
    replays = AuditEntry.objects.filter(action="replay")
    assert replays.count() == 60 and len(set(replays.values_list("task_id", flat=True))) == 60
    assert set(ReportTask.objects.values_list("status", "attempts_before_run", "max_attempts")) == {
        ("pending", 3, 6)
    }
    jobs = [j for j in get_queue("default").get_job_ids() if j.startswith("report-")]
    assert len(jobs) == len(set(jobs)) == 60
    for letter in DeadLetter.objects.all():
        assert letter.status == "replayed" and letter.replayed_in_id in (first.pk, second.pk)


@pytest.mark.parametrize("action", ["replay", "archive"])
def test_each_letters_audit_entry_names_where_its_bulk_was_started(db, action):
    ids = [make_dead_letter(task=dead_task()).pk for _ in range(3)]
    selection = build_selection(action=action, scope="selected", ids=ids)
    bulk, _ = start_bulk_action(
        selection=selection, actor="token:etl", ip_address=None, reason="fixed", source="api"
    )
    with transaction.atomic():
        assert apply_to_batch(bulk, ids).succeeded == 3
    sources = AuditEntry.objects.filter(dead_letter_id__in=ids).values_list("action", "source")
    assert sorted(sources) == [(action, "api")] * 3
