"""What the console says agrees with itself: filters do what their labels say, counts and attempt
numbers read the same on every page, links lead somewhere the reader may go."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from deadletters.models import AuditEntry
from reports.models import TaskStatus
from tests.conftest import operators_group
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def op_client(client):
    user = get_user_model().objects.create_user("op", "op@example.invalid", "pw-op-12345", is_staff=True)
    user.groups.add(operators_group())
    client.force_login(user)
    return client


def text(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def selected_options(body: str, name: str) -> list[str]:
    select = re.search(rf'<select name="{name}">(.*?)</select>', body, re.S).group(1)
    return re.findall(r'<option value="([^"]*)" selected>', select)


def test_audit_actor_filter_system_means_entries_nobody_signed(op_client):
    letter = make_dead_letter()
    AuditEntry.objects.create(actor="", action="alert", source="worker", dead_letter=letter,
                              reason="by the worker")
    AuditEntry.objects.create(actor="alice", action="replay", dead_letter=letter, reason="by alice")

    unfiltered = text(op_client.get("/console/audit/"))
    assert selected_options(unfiltered, "actor") == []  # "anyone", not "(system)"
    assert '<option value="(system)">(system)</option>' in unfiltered
    assert "by the worker" in unfiltered and "by alice" in unfiltered

    system = text(op_client.get("/console/audit/", {"actor": "(system)"}))
    assert selected_options(system, "actor") == ["(system)"]
    assert "by the worker" in system and "by alice" not in system
    alice = text(op_client.get("/console/audit/", {"actor": "alice"}))
    assert "by alice" in alice and "by the worker" not in alice


HTMX = {"HTTP_HX_REQUEST": "true"}


def replayed_and_running(batch=None):
    """A task that died after 3 attempts, was replayed, and runs its 4th (the first of the new run)."""
    from reports.models import TaskAttempt

    letter = make_dead_letter(task=make_task(status=TaskStatus.DEAD, attempt=3, batch=batch))
    task = letter.task
    task.status, task.attempt, task.attempts_before_run, task.max_attempts = TaskStatus.RUNNING, 4, 3, 6
    task.started_at = timezone.now()
    task.save()
    TaskAttempt.objects.create(task=task, number=4, started_at=timezone.now(), outcome="running",
                               worker="w pid 2")
    return letter, task


def test_task_state_poll_brings_the_attempt_list_along(op_client):
    from reports.models import TaskAttempt

    letter, task = replayed_and_running()
    state_url = f"/console/tasks/{task.public_id}/state/?after={letter.pk}"

    running = op_client.get(state_url, **HTMX).content.decode()
    assert '<section class="panel attempts" id="attempts" hx-swap-oob="true">' in running
    assert "Attempts (4)" in running and "outcome-running" in running

    TaskAttempt.objects.filter(task=task, number=4).update(outcome="succeeded", finished_at=timezone.now())
    task.status = TaskStatus.DONE
    task.save()
    done = op_client.get(state_url, **HTMX)
    assert done.status_code == 286  # the last poll
    body = done.content.decode()
    assert "state-done" in body and "outcome-succeeded" in body and "outcome-running" not in body
    # The full page has the same panel for the swap to land in.
    detail = text(op_client.get(f"/console/dead-letters/{letter.pk}/"))
    assert '<section class="panel attempts" id="attempts">' in detail
    task_page = text(op_client.get(f"/console/tasks/{task.public_id}/"))
    assert '<section class="panel attempts" id="attempts">' in task_page


def test_attempts_are_numbered_one_way_on_every_page(op_client):
    from reports.models import ReportBatch

    batch = ReportBatch.objects.create(name="nightly", total=1)
    letter, task = replayed_and_running(batch=batch)
    task.status = TaskStatus.DONE
    task.finished_at = timezone.now()
    task.save()
    phrase = "attempt 4 (1 of 3 in this run)"
    pages = {
        "dead letter": f"/console/dead-letters/{letter.pk}/",
        "task": f"/console/tasks/{task.public_id}/",
        "tasks": "/console/tasks/",
        "batch": f"/console/batches/{batch.public_id}/",
    }
    for name, path in pages.items():
        body = text(op_client.get(path))
        assert phrase in body, name
        assert "1/3" not in body and "attempt 1 of 3" not in body, name
    detail = text(op_client.get(pages["dead letter"]))
    assert "on attempt 3</dd>" in detail and "#4" in detail and "after 3 attempts" not in detail

    # Never replayed, the two counts are one: "attempt 2 of 3"; waiting, it names the next one.
    fresh = make_task(status=TaskStatus.RETRYING, attempt=2)
    body = text(op_client.get(f"/console/tasks/{fresh.public_id}/"))
    assert "attempt 2 of 3" in body and "Attempt 2 of 3 failed; retrying" in body
    fresh.status = TaskStatus.PENDING
    fresh.save()
    assert "next: attempt 3 of 3" in text(op_client.get(f"/console/tasks/{fresh.public_id}/"))


def test_task_list_last_error_column_holds_errors_only(op_client):
    done = make_task(status=TaskStatus.DONE, attempt=2, output_file="reports/out.csv",
                     last_error="TransientError: first try")
    failing = make_task(status=TaskStatus.RETRYING, attempt=1, last_error="TransientError: upstream 502")

    body = text(op_client.get("/console/tasks/"))
    cells = dict(re.findall(
        r'href="/console/tasks/([0-9a-f-]+)/".*?<td class="small last-error[^"]*">(.*?)</td>', body, re.S))
    assert cells[str(done.public_id)] == ""  # done: no download link and no stale error here
    assert "upstream 502" in cells[str(failing.public_id)]
    # The download sits with the status it belongs to.
    assert f'done</span> <a class="small" href="/console/tasks/{done.public_id}/output">download</a>' in body


def test_a_batch_with_deaths_never_looks_like_a_clean_finish(op_client):
    from reports.models import BatchStatus, ReportBatch, ReportTask

    batch = ReportBatch.objects.create(name="month-end", total=150, status=BatchStatus.COMPLETED)
    ReportTask.objects.bulk_create(
        ReportTask(kind="probe", params={}, max_attempts=3, timeout_seconds=60, batch=batch, attempt=1,
                   status=TaskStatus.DEAD if i < 59 else TaskStatus.DONE)
        for i in range(150)
    )
    clean = ReportBatch.objects.create(name="clean", total=1, status=BatchStatus.COMPLETED)
    make_task(batch=clean, status=TaskStatus.DONE, attempt=1)

    for path in (f"/console/batches/{batch.public_id}/", "/console/batches/"):
        body = text(op_client.get(path))
        progress = re.search(rf'id="batch-progress-{batch.public_id}".*?</p>', body, re.S).group(0)
        assert "completed with 59 dead" in progress and "status-completed" not in progress
        assert "outcome-bad" in progress
        # One segment per outcome: 91 done (60.67 %), then 59 dead, nothing running; the rest pending.
        assert '<rect class="progress-done" x="0" y="0" height="10" width="60.67"/>' in progress
        assert '<rect class="progress-dead" x="60.67" y="0" height="10" width="39.33"/>' in progress
        assert '<rect class="progress-running" x="100.0" y="0" height="10" width="0.0"/>' in progress
    clean_progress = re.search(rf'id="batch-progress-{clean.public_id}".*?</p>', body, re.S).group(0)
    assert '<span class="badge status-completed">completed</span>' in clean_progress


def test_same_cause_counts_open_letters_as_the_dashboard_and_groups_do(op_client):
    from deadletters.models import DeadLetter, DeadLetterStatus

    letters = [make_dead_letter(error_message="orders API 503") for _ in range(6)]
    DeadLetter.objects.filter(pk__in=[letters[3].pk, letters[4].pk]).update(status=DeadLetterStatus.ARCHIVED)
    DeadLetter.objects.filter(pk=letters[5].pk).update(status=DeadLetterStatus.REPLAYED)
    fingerprint = letters[0].fingerprint

    detail = text(op_client.get(f"/console/dead-letters/{letters[0].pk}/"))
    assert "<strong>3</strong> open dead letters with this cause, this one included" in detail
    assert "Same cause (3 open)" in detail and "5</strong> other" not in detail
    assert f'href="/console/dead-letters/?fingerprint={fingerprint}"' in detail
    archived = text(op_client.get(f"/console/dead-letters/{letters[3].pk}/"))
    assert "<strong>3</strong> open dead letters with this cause</a>" in archived

    groups = text(op_client.get("/console/dead-letters/groups/"))
    # The groups page has the cause's deaths-per-hour cell between the count and the error type.
    assert re.search(
        r'<td class="num"><strong>3</strong></td>\s*<td class="trend-col">.*?</td>\s*'
        r'<td class="etype"><code class="mono">reports.<wbr>errors.<wbr>TransientError',
        groups,
        flags=re.S,
    )
    dashboard = text(op_client.get("/console/"))
    assert re.search(r'<td class="num"><strong>3</strong></td>\s*<td><code class="mono">reports.<wbr>errors.'
                     r'<wbr>TransientError', dashboard)


def test_the_403_page_links_only_where_its_reader_may_go(client, django_user_model):
    viewer = django_user_model.objects.create_user("viewer", is_staff=True)  # staff, no console permission
    client.force_login(viewer)

    forbidden = client.get("/console/")
    assert forbidden.status_code == 403
    body = forbidden.content.decode()
    main = body.split("<main>", 1)[1]
    assert "Back to the dashboard" not in main and 'action="/console/logout/"' in main
    assert 'class="nav"' not in body  # every console page would be another 403
    for href in re.findall(r'href="(/[^"]*)"', main):
        assert client.get(href).status_code != 403, href

    # Someone who may see the dashboard but not do this keeps the way back.
    operator = django_user_model.objects.create_user("looker", is_staff=True)
    operator.user_permissions.add(*_permissions("view_deadletter"))
    client.force_login(operator)
    letter = make_dead_letter()
    refused = client.get(f"/console/dead-letters/{letter.pk}/replay/")
    assert refused.status_code == 403
    assert '<a href="/console/">Back to the dashboard</a>' in refused.content.decode()
    assert client.get("/console/").status_code == 200


def _permissions(*codenames):
    from django.contrib.auth.models import Permission

    return Permission.objects.filter(codename__in=codenames)


def test_replaying_a_permanent_error_unchanged_warns_first(op_client):
    from tests.conftest import make_death

    permanent = make_death(error_type="reports.errors.InvalidParams", message="region: not one of eu, us")
    assert (permanent.attempts, permanent.task.max_attempts) == (1, 3)
    exhausted = make_dead_letter(error_message="upstream 503")  # a transient error, every attempt used

    confirm = text(op_client.get(f"/console/dead-letters/{permanent.pk}/replay/"))
    assert "This error is permanent:" in confirm
    assert f'href="/console/dead-letters/{permanent.pk}/replay/edit/">edit the params first</a>' in confirm
    # The detail page's Replay goes through that page instead of replaying at once.
    detail = text(op_client.get(f"/console/dead-letters/{permanent.pk}/"))
    assert (f'<a class="btn btn-primary" href="/console/dead-letters/{permanent.pk}/replay/">'
            'Replay…</a>' in detail)
    assert f'<form method="post" action="/console/dead-letters/{permanent.pk}/replay/"' not in detail

    assert "This error is permanent" not in text(
        op_client.get(f"/console/dead-letters/{exhausted.pk}/replay/"))
    detail = text(op_client.get(f"/console/dead-letters/{exhausted.pk}/"))
    assert f'<form method="post" action="/console/dead-letters/{exhausted.pk}/replay/"' in detail


def test_dashboard_shows_what_is_paused_live_and_when_its_counts_were_taken(op_client, settings):
    from django.core.cache import cache

    from deadletters.models import BulkAction
    from reports.models import PausedKind

    settings.CONSOLE_DASHBOARD_CACHE_SECONDS = 300
    cache.delete("console:dashboard")
    make_dead_letter()
    first = text(op_client.get("/console/"))
    as_of = re.search(r"Counts, charts and top causes as of (\d\d:\d\d:\d\d) \(shared for up to 300 s\)",
                      first)
    assert as_of and 'id="paused"' not in first

    PausedKind.objects.create(kind="http_export", paused_by="alice", reason="orders API maintenance")
    bulk = BulkAction.objects.create(
        action="replay", status="paused", total=500, processed=120, actor="op",
        paused_reason="Paused automatically: 30 of 40 replayed tasks that finished died again "
        "(75%, threshold 50%).",
    )
    make_dead_letter()
    later = text(op_client.get("/console/"))
    # The pauses are live; the counts are the shared snapshot, and the page says from when.
    assert f"as of {as_of.group(1)} " in later
    assert re.search(
        r'status=open"><span class="badge status-open">open</span> <strong class="num">1</strong>', later)
    paused = later.split('id="paused"', 1)[1].split("</section>", 1)[0]
    assert "report kind <span class=\"mono\">http_export</span>" in paused
    assert "orders API maintenance" in paused
    assert 'href="/console/kinds/">Resume it on the Kinds page</a>' in paused
    assert "120 of 500 done" in paused and "Paused automatically: 30 of 40" in paused
    assert f'href="/console/bulk/{bulk.public_id}/">Resume or cancel it</a>' in paused
    cache.delete("console:dashboard")


def test_a_named_batch_is_called_by_its_name(op_client):
    from reports.models import ReportBatch

    named = ReportBatch.objects.create(name="month-end-2026-10", total=1)
    unnamed = ReportBatch.objects.create(total=1)
    make_dead_letter(task=make_task(status=TaskStatus.DEAD, attempt=3, batch=named))
    make_dead_letter(task=make_task(status=TaskStatus.DEAD, attempt=3, batch=unnamed))

    for path in ("/console/dead-letters/", "/console/dead-letters/groups/"):
        page = text(op_client.get(path, {"batch": str(named.public_id)}))
        chips = page.split('class="chips"', 1)[1].split("</p>", 1)[0]
        assert "month-end-2026-10" in chips and str(named.public_id) not in chips, path
    preview = text(op_client.post("/console/bulk/preview/", {
        "action": "replay", "scope": "filter", "filter_qs": f"batch={named.public_id}"}))
    assert "with batch month-end-2026-10." in preview
    listing = text(op_client.get("/console/dead-letters/"))
    assert ">batch month-end-2026-10</a>" in listing
    # No name: its short id, never an empty "batch".
    assert f'>batch <span class="mono">{str(unnamed.public_id)[:8]}</span></a>' in listing
