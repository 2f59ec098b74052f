"""Bulk actions: preview, snapshot of the selection, keyset run, throttle, pause/resume/cancel,
and the self-pause of a bulk replay whose replays die again (real worker processes)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from deadletters.bulk.control import (
    cancel_bulk_action,
    pause_bulk_action,
    resume_bulk_action,
    start_bulk_action,
)
from deadletters.bulk.runner import resume_stalled_bulk_actions, run_bulk_action
from deadletters.bulk.selection import build_selection, preview_bulk_action
from deadletters.bulk.throttle import batch_size_for
from deadletters.bulk.watch import replay_outcome
from deadletters.models import AuditEntry, BulkAction, BulkActionStatus, DeadLetter, DeadLetterStatus
from reports.models import ReportTask, TaskStatus
from tests.conftest import operators_group, wait_until
from tests.factories import make_dead_letter, make_task
from transport.connection import redis_connection
from transport.queues import get_queue


def letters(n, *, kind="probe", params=None, status=DeadLetterStatus.OPEN):
    made = []
    for _ in range(n):
        task = make_task(
            kind=kind, params=params or {}, status=TaskStatus.DEAD, attempt=3, finished_at=timezone.now()
        )
        made.append(make_dead_letter(task=task, status=status))
    return made


class VirtualTime:
    """A clock that only moves when the code under test sleeps: the throttle's schedule, exactly."""

    def __init__(self):
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def run(bulk, **kwargs):
    vt = kwargs.pop("vt", None) or VirtualTime()
    return run_bulk_action(bulk.pk, clock=vt.clock, sleep=vt.sleep, **kwargs)


def start(action, *, scope="filter", ids=(), filter_qs="", rate=1000, **kwargs):
    selection = build_selection(action=action, scope=scope, ids=ids, filter_qs=filter_qs)
    bulk, created = start_bulk_action(
        selection=selection, actor="alice", ip_address="10.0.0.1", rate_per_second=rate, **kwargs
    )
    assert created
    return bulk


def bulk_job_ids():
    return [j for j in get_queue("default").get_job_ids() if j.startswith("bulk-")]


@pytest.fixture
def client_alice(db, django_user_model):
    user = django_user_model.objects.create_user("alice", "a@example.invalid", "pw-123456789", is_staff=True)
    user.groups.add(operators_group())
    client = Client(REMOTE_ADDR="10.9.8.7")
    client.force_login(user)
    return client


# --- preview ------------------------------------------------------------------------


def test_preview_counts_what_the_filter_and_action_would_touch(client_alice):
    letters(12, kind="probe")
    letters(3, kind="sales_summary")
    letters(2, kind="probe", status=DeadLetterStatus.ARCHIVED)

    response = client_alice.post(
        reverse("console:bulk-preview"), {"action": "archive", "scope": "filter", "filter_qs": "kind=probe"}
    )

    assert response.status_code == 200
    preview = response.context["preview"]
    assert preview.count == 12 and len(preview.sample) == 10
    assert all(letter.kind == "probe" and letter.status == "open" for letter in preview.sample)
    assert 'id="bulk-count">12<' in response.content.decode()
    # Restore counts the archived ones of the same filter (status=all lets them match).
    selection = build_selection(action="restore", scope="filter", filter_qs="status=all&kind=probe")
    assert preview_bulk_action(selection=selection).count == 2
    assert not BulkAction.objects.exists()  # a dry run


def test_preview_of_a_selection_counts_only_eligible_selected_letters(client_alice):
    chosen = letters(3) + letters(1, status=DeadLetterStatus.REPLAYED)
    letters(5)

    response = client_alice.post(
        reverse("console:bulk-preview"),
        {"action": "replay", "scope": "selected", "ids": [str(x.pk) for x in chosen], "filter_qs": ""},
    )

    assert response.context["preview"].count == 3


@pytest.mark.parametrize(
    "data, message",
    [
        ({"action": "explode", "scope": "filter"}, "an action the console does not know"),
        ({"action": "archive", "scope": "selected"}, "select at least one dead letter"),
        ({"action": "archive", "scope": "selected", "ids": ["1", "x"]}, "must be dead-letter ids"),
        ({"action": "archive", "scope": "filter", "filter_qs": "status=bogus"}, "status"),
        ({"action": "archive", "scope": "selected", "ids": [str(10**30)]}, "must be dead-letter ids"),
        ({"action": "archive", "scope": "selected", "ids": ["-4"]}, "must be dead-letter ids"),
        ({"action": "archive", "scope": "filter", "max_id": "x"}, "snapshot: must be a dead-letter id"),
    ],
)
def test_bad_bulk_input_is_refused_with_a_message_and_a_way_back(client_alice, data, message):
    data = dict(data, filter_qs=data.get("filter_qs", "kind=probe"))
    for step in ("bulk-preview", "bulk-start"):
        response = client_alice.post(reverse(f"console:{step}"), data)

        assert response.status_code == 400
        body = response.content.decode()
        assert message in body
        assert f'href="{reverse("console:deadletter-list")}?' in body
    assert not BulkAction.objects.exists()


def test_bulk_needs_the_actions_permission_and_post(db, django_user_model):
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("viewer", "v@example.invalid", "pw-123456789", is_staff=True)
    for codename in ("view_deadletter", "view_bulkaction", "archive_deadletter"):
        user.user_permissions.add(
            Permission.objects.get(codename=codename, content_type__app_label="deadletters")
        )
    client = Client()
    client.force_login(user)
    [letter] = letters(1)
    data = {"action": "replay", "scope": "selected", "ids": [letter.pk]}

    assert client.post(reverse("console:bulk-preview"), data).status_code == 403
    assert client.post(reverse("console:bulk-start"), data).status_code == 403
    assert client.get(reverse("console:bulk-start")).status_code == 405
    # The preview is also a GET (a cause's link): it checks the action's permission all the same.
    assert client.get(reverse("console:bulk-preview") + "?action=replay").status_code == 403
    assert not BulkAction.objects.exists()
    bulk = start("replay", scope="selected", ids=[letter.pk])
    for name in ("bulk-pause", "bulk-cancel"):
        assert client.post(reverse(f"console:{name}", args=[bulk.public_id])).status_code == 403
        assert client.get(reverse(f"console:{name}", args=[bulk.public_id])).status_code == 405
    assert BulkAction.objects.get(pk=bulk.pk).status == BulkActionStatus.PENDING


# --- start and run -----------------------------------------------------------------------


def test_start_from_the_preview_form_audits_once_and_enqueues_one_job(
    client_alice, django_capture_on_commit_callbacks
):
    made = letters(5)
    preview = client_alice.post(reverse("console:bulk-preview"), {"action": "archive", "scope": "filter"})
    token = preview.context["request_token"]
    form = {
        "action": "archive",
        "scope": "filter",
        "filter_qs": "",
        "max_id": preview.context["selection"].max_id,
        "request_token": token,
        "reason": "cleanup",
        "rate_per_second": "50",
    }

    with django_capture_on_commit_callbacks(execute=True):
        first = client_alice.post(reverse("console:bulk-start"), form)
        second = client_alice.post(reverse("console:bulk-start"), form)  # double submit

    [bulk] = BulkAction.objects.all()
    assert first["Location"] == second["Location"] == reverse("console:bulk-detail", args=[bulk.public_id])
    assert (bulk.total, bulk.rate_per_second, bulk.reason, bulk.actor, bulk.ip_address) == (
        5,
        50,
        "cleanup",
        "alice",
        "10.9.8.7",
    )
    assert len(bulk_job_ids()) == 1
    [entry] = AuditEntry.objects.filter(action="bulk_archive")
    assert (entry.item_count, entry.reason, entry.details["bulk"]) == (5, "cleanup", str(bulk.public_id))

    assert run(bulk) == BulkActionStatus.COMPLETED
    bulk.refresh_from_db()
    assert (bulk.processed, bulk.succeeded, bulk.skipped, bulk.percent) == (5, 5, 0, 100)
    assert all(
        d.status == DeadLetterStatus.ARCHIVED for d in DeadLetter.objects.filter(pk__in=[x.pk for x in made])
    )
    per_letter = AuditEntry.objects.filter(action="archive")
    assert per_letter.count() == 5 and {e.details["bulk"] for e in per_letter} == {str(bulk.public_id)}


def test_invalid_rate_rerenders_the_preview(client_alice):
    letters(2)
    response = client_alice.post(
        reverse("console:bulk-start"), {"action": "archive", "scope": "filter", "rate_per_second": "-3"}
    )

    assert response.status_code == 400
    assert "must be between 0.1 and" in response.content.decode()
    assert not BulkAction.objects.exists()


def test_filter_scope_excludes_deaths_after_the_start(db):
    before = letters(4, kind="probe")
    letters(2, kind="sales_summary")
    bulk = start("discard", filter_qs="kind=probe")
    late = letters(3, kind="probe")  # died after the start: not part of this bulk

    assert run(bulk) == BulkActionStatus.COMPLETED

    bulk.refresh_from_db()
    assert (bulk.total, bulk.processed, bulk.succeeded) == (4, 4, 4)
    statuses = dict(DeadLetter.objects.values_list("pk", "status"))
    assert {statuses[x.pk] for x in before} == {DeadLetterStatus.DISCARDED}
    assert {statuses[x.pk] for x in late} == {DeadLetterStatus.OPEN}
    assert DeadLetter.objects.filter(kind="sales_summary", status="open").count() == 2


def test_selection_scope_touches_only_the_selection_and_skips_what_changed(db):
    chosen = letters(4)
    others = letters(3)
    bulk = start("archive", scope="selected", ids=[x.pk for x in chosen])
    DeadLetter.objects.filter(pk=chosen[1].pk).update(status=DeadLetterStatus.DISCARDED)  # someone else acted

    run(bulk)

    bulk.refresh_from_db()
    assert (bulk.status, bulk.total, bulk.processed, bulk.succeeded, bulk.skipped) == (
        "completed",
        4,
        4,
        3,
        1,
    )
    assert DeadLetter.objects.get(pk=chosen[1].pk).status == DeadLetterStatus.DISCARDED
    assert not DeadLetter.objects.filter(pk__in=[x.pk for x in others]).exclude(status="open").exists()


def test_bulk_replay_links_each_letter_to_its_bulk(db):
    made = letters(3)
    bulk = start("replay", scope="selected", ids=[x.pk for x in made], reason="fixed")

    run(bulk)

    for letter in DeadLetter.objects.filter(pk__in=[x.pk for x in made]):
        assert (letter.status, letter.replayed_in_id, letter.replayed_by) == ("replayed", bulk.pk, "alice")
    entries = AuditEntry.objects.filter(action="replay")
    assert entries.count() == 3
    assert {(e.details["bulk"], e.reason, e.ip_address) for e in entries} == {
        (str(bulk.public_id), "fixed", "10.0.0.1")
    }
    assert ReportTask.objects.filter(status=TaskStatus.PENDING).count() == 3
    assert replay_outcome(bulk).replayed == 3


# --- throttle -------------------------------------------------------------------------------


def test_run_is_throttled_to_the_bulk_rate(db, settings):
    settings.BULK_ACTION_BATCH_SIZE = 50
    letters(45)
    bulk = start("archive", rate=20)
    vt = VirtualTime()

    run(bulk, vt=vt)

    # 45 letters at 20/s: batches of 20, 20, 5 and 45/20 s of (virtual) time, slept in pieces of
    # at most half a second so a rate change, pause or cancel is seen within a second.
    assert batch_size_for(20) == 20
    assert sum(vt.sleeps) == pytest.approx(45 / 20)
    assert vt.sleeps == [0.5, 0.5, 0.5, 0.5, 0.25]
    assert BulkAction.objects.get(pk=bulk.pk).processed == 45


# --- pause, resume, cancel, recovery ----------------------------------------------------------


def test_pause_stops_the_run_and_resume_carries_on_from_the_cursor(client_alice, settings):
    settings.BULK_ACTION_BATCH_SIZE = 5
    made = letters(12)
    bulk = start("archive", rate=1000)
    assert run(bulk, slice_seconds=0) == "continued"  # one batch, then a fresh job takes over
    assert BulkAction.objects.get(pk=bulk.pk).processed == 5

    response = client_alice.post(reverse("console:bulk-pause", args=[bulk.public_id]))
    assert response.status_code == 302
    assert run(bulk) == BulkActionStatus.PAUSED  # a job arriving while paused does nothing
    bulk.refresh_from_db()
    assert (bulk.status, bulk.processed, bulk.paused_reason) == ("paused", 5, "Paused by alice.")

    client_alice.post(reverse("console:bulk-resume", args=[bulk.public_id]))
    assert BulkAction.objects.get(pk=bulk.pk).status == BulkActionStatus.PENDING
    assert run(bulk) == BulkActionStatus.COMPLETED
    bulk.refresh_from_db()
    assert (bulk.processed, bulk.succeeded, bulk.skipped) == (12, 12, 0)  # nothing done twice
    assert DeadLetter.objects.filter(pk__in=[x.pk for x in made], status="archived").count() == 12
    assert list(
        AuditEntry.objects.filter(action__in=("bulk_pause", "bulk_resume")).values_list("action", "actor")
    ) == [
        ("bulk_resume", "alice"),
        ("bulk_pause", "alice"),
    ]


def test_cancel_leaves_the_rest_untouched(client_alice, settings):
    settings.BULK_ACTION_BATCH_SIZE = 4
    letters(10)
    bulk = start("discard")
    run(bulk, slice_seconds=0)

    response = client_alice.post(reverse("console:bulk-cancel", args=[bulk.public_id]), follow=True)

    assert "Bulk discard cancelled" in response.content.decode()
    assert run(bulk) == BulkActionStatus.CANCELLED
    assert DeadLetter.objects.filter(status="discarded").count() == 4
    assert DeadLetter.objects.filter(status="open").count() == 6
    again = client_alice.post(reverse("console:bulk-resume", args=[bulk.public_id]), follow=True)
    assert "cannot resume a bulk action that is cancelled" in again.content.decode()
    with pytest.raises(Exception, match="cannot pause"):
        pause_bulk_action(bulk_id=bulk.pk, actor="alice")


def test_a_run_that_died_midway_is_resumed_by_the_command(db, settings, django_capture_on_commit_callbacks):
    settings.BULK_ACTION_BATCH_SIZE = 3
    letters(7)
    bulk = start("archive")
    run(bulk, slice_seconds=0)  # the worker "dies" here: its continuation job is lost
    redis_connection().flushall()
    BulkAction.objects.filter(pk=bulk.pk).update(updated_at=timezone.now() - timedelta(minutes=10))

    assert resume_stalled_bulk_actions() == [bulk.pk]
    assert len(bulk_job_ids()) == 1
    run(bulk)

    bulk.refresh_from_db()
    assert (bulk.status, bulk.processed, bulk.succeeded) == ("completed", 7, 7)


def test_resume_and_cancel_services_refuse_finished_bulks(db):
    letters(1)
    bulk = start("archive")
    run(bulk)
    with pytest.raises(Exception, match="cannot resume a bulk action that is completed"):
        resume_bulk_action(bulk_id=bulk.pk, actor="alice")
    with pytest.raises(Exception, match="cannot cancel"):
        cancel_bulk_action(bulk_id=bulk.pk, actor="alice")


def test_progress_partial_polls_until_finished(client_alice):
    letters(3)
    bulk = start("archive")
    detail = reverse("console:bulk-detail", args=[bulk.public_id])

    page = client_alice.get(detail)
    assert page.status_code == 200 and 'hx-trigger="every 1s"' in page.content.decode()
    partial = client_alice.get(detail, HTTP_HX_REQUEST="true")
    assert partial.status_code == 200 and "<html" not in partial.content.decode()

    run(bulk)
    final = client_alice.get(detail, HTTP_HX_REQUEST="true")
    assert final.status_code == 286  # htmx: swap this in and stop polling
    body = final.content.decode()
    assert "100%" in body and "hx-trigger" not in body
    assert client_alice.get(reverse("console:bulk-list")).status_code == 200


# --- the died-again watch, with real workers ----------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_bulk_replay_pauses_itself_when_replays_die_again_then_resumes_after_the_fix(
    start_worker, fast_retries, redis_conn
):
    # One attempt per replay, so a replayed task dies (or succeeds) right after its first run
    # instead of queueing its retries behind every other replay's first attempt.
    fast_retries.REPORT_MAX_ATTEMPTS = 1
    failing = {"fail_attempts": 99}
    made = letters(60, params=failing)
    bulk = start("replay", rate=3, pause_threshold=0.5)
    for _ in range(3):  # one runs the bulk, the others the replayed tasks
        start_worker(BULK_REPLAY_PAUSE_MIN_SAMPLE=5)

    paused = wait_until(
        lambda: BulkAction.objects.filter(pk=bulk.pk, status=BulkActionStatus.PAUSED).first(),
        timeout=60,
        message="the bulk replay to pause itself",
    )

    assert paused.processed < paused.total == 60
    assert paused.paused_reason.startswith("Paused automatically:")
    outcome = replay_outcome(paused)
    assert outcome.finished >= 5 and outcome.died_again / outcome.finished > 0.5
    untouched = DeadLetter.objects.filter(pk__in=[x.pk for x in made], status=DeadLetterStatus.OPEN).count()
    assert untouched == 60 - paused.processed > 0
    auto = AuditEntry.objects.get(action="bulk_pause")
    assert auto.details["automatic"] is True and auto.source == "system"

    # The operator fixes the cause (here: the tasks' params) and resumes.
    ReportTask.objects.filter(status=TaskStatus.DEAD).update(params={"fail_attempts": 0})
    resume_bulk_action(bulk_id=bulk.pk, actor="alice")
    done = wait_until(
        lambda: BulkAction.objects.filter(pk=bulk.pk, status=BulkActionStatus.COMPLETED).first(),
        timeout=60,
        message="the resumed bulk to complete",
    )
    assert done.processed == 60
    assert DeadLetter.objects.filter(pk__in=[x.pk for x in made], status=DeadLetterStatus.OPEN).count() == 0
    # Replays started after the resume succeed: the watch looks at those, not the earlier deaths.
    wait_until(
        lambda: (
            not ReportTask.objects.filter(
                dead_letters__replayed_in=bulk,
                status__in=(TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.RETRYING),
            ).exists()
        ),
        timeout=60,
        message="the resumed replays to finish",
    )
    assert ReportTask.objects.filter(status=TaskStatus.DONE).count() == 60 - paused.processed
