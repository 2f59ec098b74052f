"""What the on-call review found in the console, each checked through the real views and templates."""

import re
import uuid

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from deadletters.models import (
    Alert,
    AlertStatus,
    AuditEntry,
    BulkAction,
    BulkActionStatus,
    DeadLetter,
    DeadLetterStatus,
)
from deadletters.services.replay import replay_dead_letter
from reports.models import ReportTask, TaskStatus
from tests.conftest import make_death, operators_group
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
PROBE = {"sleep_seconds": 0, "fail_attempts": 0, "fail_permanently": False, "write_output": True}


@pytest.fixture
def op(django_user_model):
    user = django_user_model.objects.create_user("op", "op@example.invalid", "pw-op-12345", is_staff=True)
    user.groups.add(operators_group())
    return user


@pytest.fixture
def op_client(op):
    client = Client()
    client.force_login(op)
    return client


def dead(*, kind="probe", error_type="reports.errors.TransientError", error_message="boom", **fields):
    task = make_task(kind=kind, params=dict(PROBE), status=TaskStatus.DEAD, attempt=3,
                     finished_at=timezone.now())
    return make_dead_letter(task=task, error_type=error_type, error_message=error_message, **fields)


def body(response) -> str:
    return response.content.decode()


# --- bug 2: the tasks list's "Last error" column ------------------------------------------------


def test_task_list_shows_the_last_error_of_dead_and_retrying_tasks(op_client):
    make_task(status=TaskStatus.DEAD, attempt=3, last_error="requests.exceptions.ConnectionError: refused")
    make_task(status=TaskStatus.RETRYING, attempt=1, last_error="TimeoutError: upstream slow")

    page = body(op_client.get("/console/tasks/"))

    assert "requests.exceptions.ConnectionError: refused" in page
    assert "TimeoutError: upstream slow" in page


# --- bug 3: skipped alerts are counted, and named on the detail page -----------------------------


def test_dashboard_counts_skipped_alerts_when_no_robot_is_configured(op_client, settings):
    settings.DINGTALK_WEBHOOK = ""
    for _ in range(7):
        make_death()  # each death writes its alert; with no webhook it is born "skipped"
    assert Alert.objects.filter(status=AlertStatus.SKIPPED).count() == 7

    page = body(op_client.get("/console/"))

    panel = page[page.index('id="alert-health"') :]
    counts = dict(re.findall(r'badge alert-(\w+)">\w+</span> <strong class="num">(\d+)<', panel))
    assert counts["skipped"] == "7"
    assert "7 skipped: recorded, never sent" in panel


def test_a_skipped_alert_says_why_on_the_detail_page(op_client, settings):
    settings.DINGTALK_WEBHOOK = ""
    letter = make_death()

    page = body(op_client.get(f"/console/dead-letters/{letter.pk}/"))

    assert "none: no DingTalk robot configured" in page
    assert "not grouped yet" not in page


# --- bug 4: the bulk outcome is followed until the replays settle --------------------------------


def _completed_replay_bulk(n=3) -> tuple[BulkAction, list[DeadLetter]]:
    bulk = BulkAction.objects.create(
        action="replay", status=BulkActionStatus.COMPLETED, total=n, processed=n, succeeded=n, actor="op",
        finished_at=timezone.now(),
    )
    letters = [dead() for _ in range(n)]
    for letter in letters:
        replay_dead_letter(dead_letter_id=letter.pk, actor="op", ip_address=None, bulk=bulk)
    return bulk, letters


def test_bulk_progress_keeps_polling_after_completed_while_replays_run(op_client):
    bulk, _ = _completed_replay_bulk()

    response = op_client.get(f"/console/bulk/{bulk.public_id}/", **HTMX)

    assert response.status_code == 200  # not 286: htmx keeps polling
    assert 'hx-trigger="every 2s"' in body(response)
    assert "0 of 3 replayed tasks finished so far" in body(response)


def test_bulk_headline_says_every_replay_died_again_and_links_the_new_letters(op_client):
    bulk, letters = _completed_replay_bulk()
    newer = []
    for letter in letters:
        ReportTask.objects.filter(pk=letter.task_id).update(status=TaskStatus.DEAD)
        newer.append(make_dead_letter(task=ReportTask.objects.get(pk=letter.task_id),
                                      error_message="boom again"))

    response = op_client.get(f"/console/bulk/{bulk.public_id}/", **HTMX)

    page = body(response)
    assert response.status_code == 286  # settled: htmx stops polling
    assert "Every replayed task died again (3 of 3)" in page
    assert "outcome-bad" in page and "status-completed outcome-bad" in page
    assert f"?status=all&amp;fingerprint={newer[0].fingerprint}" in page
    assert f'href="/console/dead-letters/{newer[-1].pk}/"' in page


def test_bulk_headline_when_every_replay_finished(op_client):
    bulk, letters = _completed_replay_bulk(2)
    ReportTask.objects.filter(pk__in=[x.task_id for x in letters]).update(status=TaskStatus.DONE)

    response = op_client.get(f"/console/bulk/{bulk.public_id}/", **HTMX)

    assert response.status_code == 286
    assert "All 2 replayed tasks finished; none died again." in body(response)


# --- favicon, and attempt numbers: "attempt 4 (1 of 3 in this run)" -----------------------------


def test_favicon_is_served(client):
    response = client.get("/favicon.ico", follow=True)

    assert response.status_code == 200
    assert response.redirect_chain and response.redirect_chain[0][1] == 301
    assert b"".join(response.streaming_content)[:4] == b"\x00\x00\x01\x00"  # an ICO file


def test_a_replayed_task_counts_attempts_within_its_run(op_client):
    task = make_task(status=TaskStatus.RETRYING, attempt=4, max_attempts=6, attempts_before_run=3)

    detail = body(op_client.get(f"/console/tasks/{task.public_id}/"))
    listing = body(op_client.get("/console/tasks/"))

    assert "attempt 4 (1 of 3 in this run)" in detail and "attempt 1 of 4" not in detail
    assert ">attempt 4 (1 of 3 in this run)<" in listing


# --- identifiers are links -----------------------------------------------------------------------


def test_the_list_links_task_ids_and_causes(op_client):
    letter = dead()

    page = body(op_client.get("/console/dead-letters/"))

    short = str(letter.task.public_id)[:8]
    assert f'href="/console/tasks/{letter.task.public_id}/"' in page and f">{short}</a>" in page
    assert f"fingerprint={letter.fingerprint}" in page


def test_the_detail_page_links_its_fingerprint_and_the_bulk_that_replayed_it(op_client):
    bulk, (letter,) = _completed_replay_bulk(1)

    page = body(op_client.get(f"/console/dead-letters/{letter.pk}/"))

    assert re.search(rf'href="/console/dead-letters/\?[^"]*fingerprint={letter.fingerprint}"[^>]*>'
                     rf'{letter.fingerprint[:12]}<', page)
    assert f'href="/console/bulk/{bulk.public_id}/"' in page


def test_audit_rows_link_their_bulk(op_client):
    bulk, (letter,) = _completed_replay_bulk(1)
    AuditEntry.objects.create(action="bulk_replay", actor="op", item_count=1,
                              details={"bulk": str(bulk.public_id)})
    AuditEntry.objects.create(action="bulk_replay", actor="op", details={"bulk": "not-a-uuid"})

    page = body(op_client.get("/console/audit/"))

    # The bulk's own row and the per-letter replay it made both lead to the bulk page.
    assert page.count(f'href="/console/bulk/{bulk.public_id}/"') == 2
    assert f"in bulk {str(bulk.public_id)[:8]}" in page


# --- groups: an action per cause through the preview -----------------------------------------------


def test_each_cause_offers_replay_archive_discard_through_the_preview(op_client):
    letters = [dead(error_message="db down") for _ in range(3)]
    dead(error_type="reports.errors.InvalidParams", error_message="region missing")

    page = body(op_client.get("/console/dead-letters/groups/"))
    assert page.count('action="/console/bulk/preview/"') == 2
    assert f'name="filter_qs" value="fingerprint={letters[0].fingerprint}"' in page

    preview = op_client.post(
        "/console/bulk/preview/",
        {"action": "replay", "scope": "filter", "filter_qs": f"fingerprint={letters[0].fingerprint}"},
    )
    assert preview.status_code == 200
    assert preview.context["preview"].count == 3
    assert not BulkAction.objects.exists()


# --- the bulk bar and the preview's words ---------------------------------------------------------


def test_the_bulk_bar_offers_only_actions_that_can_match(op_client):
    dead()

    open_list = body(op_client.get("/console/dead-letters/"))

    assert 'value="restore"' not in open_list
    assert 'value="archive"' in open_list and 'value="replay"' in open_list
    assert 'id="bulk-error"' in open_list  # where console.js says "nothing ticked"
    dead(status=DeadLetterStatus.ARCHIVED)
    archived_list = body(op_client.get("/console/dead-letters/?status=archived"))
    assert 'value="restore"' in archived_list and 'value="archive"' not in archived_list


def test_the_preview_names_what_it_will_touch(op_client):
    dead(kind="probe")
    dead(kind="probe", status=DeadLetterStatus.ARCHIVED)

    open_only = op_client.post(
        "/console/bulk/preview/", {"action": "replay", "scope": "filter", "filter_qs": "kind=probe"}
    )
    everything = op_client.post(
        "/console/bulk/preview/",
        {"action": "replay", "scope": "filter", "filter_qs": "status=all&kind=probe"},
    )

    assert "every open one with kind probe" in body(open_only)
    assert "(open, archived or discarded)" not in body(open_only)
    assert open_only.context["preview"].count == 1
    assert "every open, archived or discarded one with kind probe" in body(everything)
    assert everything.context["preview"].count == 2


def test_the_preview_of_a_selection_says_what_is_left_alone(op_client):
    ids = [dead().pk, dead().pk, dead(status=DeadLetterStatus.REPLAYED).pk]

    response = op_client.post("/console/bulk/preview/",
                              {"action": "archive", "scope": "selected", "ids": ids})

    assert "1 of the 3 dead letters you selected" not in body(response)
    assert re.search(r">2</strong> of the 3 dead letters you selected: the open ones; the other 1 stays "
                     r"as it is", body(response))


# --- the edit-and-replay page ----------------------------------------------------------------------


def test_edit_page_shows_the_error_and_the_kinds_params(op_client):
    letter = dead(error_type="reports.errors.InvalidParams",
                  error_message="fail_attempts: must be an integer")

    page = body(op_client.get(f"/console/dead-letters/{letter.pk}/replay/edit/"))

    assert "fail_attempts: must be an integer" in page
    table = page[page.index('class="table compact kind-params"') :]
    for name, type_label, allowed in [
        ("sleep_seconds", "number", "0 to 600"),
        ("fail_attempts", "integer", "0 to 1000"),
        ("fail_permanently", "true/false", ""),
    ]:
        assert re.search(rf'<td class="mono">{name}</td><td>{re.escape(type_label)}</td>', table), name
        assert allowed in table


def test_edit_page_reports_every_invalid_field_at_once(op_client):
    letter = dead()

    response = op_client.post(
        f"/console/dead-letters/{letter.pk}/replay/edit/",
        {"params": '{"sleep_seconds": -1, "fail_attempts": "x", "colour": 1}', "reason": ""},
    )

    assert response.status_code == 400
    errors = response.context["form"].errors["params"]
    assert errors == [
        "colour: unknown parameter",
        "sleep_seconds: must be between 0 and 600",
        "fail_attempts: must be an integer",
    ]
    assert "3 problems" in body(response)
    assert ReportTask.objects.get(pk=letter.task_id).status == TaskStatus.DEAD


def test_replay_with_edited_params_needs_its_own_permission(django_user_model):
    user = django_user_model.objects.create_user("plain", password="pw-123456789", is_staff=True)
    for codename in ("view_deadletter", "replay_deadletter"):
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="deadletters", codename=codename))
    client = Client()
    client.force_login(user)
    letter = dead()
    edit = f"/console/dead-letters/{letter.pk}/replay/edit/"

    assert client.get(edit).status_code == 403
    assert client.post(edit, {"params": "{}"}).status_code == 403
    assert edit not in body(client.get(f"/console/dead-letters/{letter.pk}/"))
    # Plain replay is still theirs.
    assert client.post(f"/console/dead-letters/{letter.pk}/replay/").status_code == 302
    assert ReportTask.objects.get(pk=letter.task_id).status == TaskStatus.PENDING


def test_the_operators_group_can_replay_with_edited_params(op):
    assert op.has_perm("deadletters.replay_edited_deadletter")


# --- the already-replayed page leads to the new dead letter -------------------------------------


def test_already_replayed_page_links_the_letter_of_the_death_after_the_replay(op_client):
    letter = dead()
    replay_dead_letter(dead_letter_id=letter.pk, actor="someone", ip_address=None)
    ReportTask.objects.filter(pk=letter.task_id).update(status=TaskStatus.DEAD)
    again = make_dead_letter(task=ReportTask.objects.get(pk=letter.task_id), error_message="boom again")

    response = op_client.get(f"/console/dead-letters/{letter.pk}/replay/")

    assert response.status_code == 409
    assert "The replay died again" in body(response)
    assert f'href="/console/dead-letters/{again.pk}/"' in body(response)


# --- a reason for every action, next to it -------------------------------------------------------


def test_every_action_on_the_detail_page_has_its_own_reason_field(op_client):
    letter = dead()

    page = body(op_client.get(f"/console/dead-letters/{letter.pk}/"))

    # Discard's reason field is on its confirmation page (discarding never takes one click).
    for verb, action in [("replaying", "replay"), ("archiving", "archive")]:
        form = re.search(rf'<form method="post" action="/console/dead-letters/{letter.pk}/{action}/"'
                         r'.*?</form>', page, re.S)
        assert form and f'aria-label="Reason for {verb}"' in form.group(0), action


@pytest.fixture
def reason_required(settings):
    settings.DEADLETTER_REQUIRE_REASON = True


@pytest.mark.parametrize("action", ["replay", "archive", "discard"])
def test_with_the_setting_an_action_without_reason_is_refused(op_client, reason_required, action):
    letter = dead()
    url = f"/console/dead-letters/{letter.pk}/{action}/"

    refused = op_client.post(url, {"reason": "   ", "confirmed": "yes"})

    assert refused.status_code == 400
    assert "reason is required" in body(refused).lower() or "say why" in body(refused).lower()
    assert DeadLetter.objects.get(pk=letter.pk).status == DeadLetterStatus.OPEN
    assert not AuditEntry.objects.exists()
    assert op_client.post(url, {"reason": "upstream fixed", "confirmed": "yes"}).status_code == 302
    assert AuditEntry.objects.get().reason == "upstream fixed"


def test_with_the_setting_the_reason_fields_are_marked_required(op_client, reason_required):
    letter = dead()
    page = body(op_client.get(f"/console/dead-letters/{letter.pk}/"))
    assert page.count('placeholder="Reason (required)" required') == 2
    confirm = body(op_client.get(f"/console/dead-letters/{letter.pk}/discard/"))
    assert "Reason (required, kept in the audit log)" in confirm
    assert 'rows="2" maxlength="2000" required' in confirm


def test_with_the_setting_a_bulk_needs_a_reason(op_client, reason_required):
    letter = dead()
    data = {"action": "archive", "scope": "selected", "ids": [letter.pk], "request_token": str(uuid.uuid4())}

    refused = op_client.post("/console/bulk/start/", data)

    assert refused.status_code == 400
    assert "a reason is required" in body(refused)
    assert not BulkAction.objects.exists()
    assert op_client.post("/console/bulk/start/", {**data, "reason": "cleanup"}).status_code == 302


def test_with_the_setting_the_api_replay_needs_a_reason(token_client, reason_required):
    letter = dead()
    path = f"/report/task/{letter.task.public_id}/replay"

    refused = token_client.post(path, {}, content_type="application/json")

    assert refused.status_code == 422
    assert refused.json()["field"] == "reason"
    assert ReportTask.objects.get(pk=letter.task_id).status == TaskStatus.DEAD
    assert token_client.post(path, {"reason": "fixed"}, content_type="application/json").status_code == 200


# --- Content-Security-Policy ---------------------------------------------------------------------


def test_console_pages_carry_a_csp_they_satisfy(op_client):
    letter = dead()
    for path in ("/console/", "/console/dead-letters/", f"/console/dead-letters/{letter.pk}/",
                 "/console/login/"):
        response = op_client.get(path)
        policy = response["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "style-src 'self'" in policy
        assert "unsafe-inline" not in policy
        page = body(response)
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page), f"inline script on {path}"
        assert not re.search(r"\son[a-z]+=", page), f"inline event handler on {path}"
        assert not re.search(r"\sstyle=", page), f"inline style on {path}"
        assert '"includeIndicatorStyles": false' in page


def test_same_cause_replaces_a_cause_filter_instead_of_repeating_it(op_client):
    letter = dead()

    page = body(op_client.get(f"/console/dead-letters/?kind=probe&fingerprint={letter.fingerprint}"))

    link = re.search(r'href="(/console/dead-letters/\?[^"]*)"[^>]*>same cause', page).group(1)
    assert link.count("fingerprint=") == 1 and "kind=probe" in link
