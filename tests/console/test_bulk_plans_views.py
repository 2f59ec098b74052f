"""The console's canary and start time: the bulk confirm form's fieldset and field, "Replay
later..." on a dead letter, the Scheduled list with its cancel, and a run's page in each phase.
A datetime-local value is a wall-clock time in TIME_ZONE, which the form names."""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from deadletters.bulk.canary import decide_canaries
from deadletters.models import AuditEntry, BulkAction, BulkActionStatus, DeadLetter
from reports.models import ReportTask, TaskStatus
from tests.conftest import operators_group
from tests.deadletters.bulk.test_actions import letters, run, start
from tests.factories import make_dead_letter

pytestmark = pytest.mark.django_db

SHANGHAI = ZoneInfo("Asia/Shanghai")


@pytest.fixture
def operator_client(db, django_user_model, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    user = django_user_model.objects.create_user("alice", "a@example.invalid", "pw-123456789", is_staff=True)
    user.groups.add(operators_group())
    client = Client(REMOTE_ADDR="10.9.8.7")
    client.force_login(user)
    return client


def local_input(moment: datetime) -> str:
    return moment.astimezone(SHANGHAI).strftime("%Y-%m-%dT%H:%M")


def confirm_form(client, **fields):
    preview = client.post(reverse("console:bulk-preview"), {"action": "replay", "scope": "filter"})
    form = {
        "action": "replay",
        "scope": "filter",
        "filter_qs": "",
        "max_id": preview.context["selection"].max_id,
        "request_token": preview.context["request_token"],
        "reason": "upstream fixed",
        "rate_per_second": "50",
        "pause_threshold": "0.5",
        **fields,
    }
    return preview, form


def test_the_replay_preview_offers_a_canary_and_a_start_time_in_the_consoles_zone(operator_client):
    letters(7)
    preview, _ = confirm_form(operator_client)
    page = preview.content.decode()

    assert "<legend>Canary first</legend>" in page
    assert 'name="canary" id="id_canary" value="" min="1" max="7"' in page
    assert 'name="canary_success" id="id_canary_success" value="0.8"' in page
    assert "15 minutes passed" in page  # BULK_CANARY_WAIT_SECONDS, in the help
    assert 'type="datetime-local" name="start_at"' in page
    assert "Times are in Asia/Shanghai (UTC+08:00)" in page
    archive = operator_client.post(reverse("console:bulk-preview"), {"action": "archive", "scope": "filter"})
    assert "Canary first" not in archive.content.decode()  # an archive has nothing to try first
    assert 'name="start_at"' in archive.content.decode()


def test_a_canary_started_from_the_form(operator_client, django_capture_on_commit_callbacks):
    letters(7)
    _, form = confirm_form(operator_client, canary="3", canary_success="0.6")

    with django_capture_on_commit_callbacks(execute=True):
        response = operator_client.post(reverse("console:bulk-start"), form)

    bulk = BulkAction.objects.get()
    assert response["Location"] == reverse("console:bulk-detail", args=[bulk.public_id])
    assert (bulk.status, bulk.canary_size, bulk.canary_success, bulk.canary_phase) == (
        "pending", 3, 0.6, "pending")
    page = operator_client.get(response["Location"]).content.decode()
    assert "the first 3 replays, then on only if at least 60% of them end done" in page
    assert "Canary first: 3 replays, then a pause until at least 2 of them (60%) end done." in page

    assert run(bulk) == BulkActionStatus.CANARY
    waiting = operator_client.get(response["Location"]).content.decode()
    assert "Canary: waiting for the outcome of its 3 replays." in waiting
    assert "0 done, 0 died again, 3 still running or retrying." in waiting
    assert "Pause</button>" not in waiting and "Cancel</button>" in waiting

    for task in ReportTask.objects.filter(dead_letters__replayed_in=bulk).distinct():
        ReportTask.objects.filter(pk=task.pk).update(status=TaskStatus.DEAD)
        make_dead_letter(task=task, error_type="requests.exceptions.ConnectionError", error_message="refused")
    decide_canaries()
    failed = operator_client.get(response["Location"]).content.decode()
    assert "Canary failed: the run stopped." in failed
    assert "3 of the 3 canary replays died again, 0 done; at least 2 (60%) had to end done." in failed
    assert "requests.<wbr>exceptions.<wbr>ConnectionError" in failed  # the new dead letters by cause
    assert 'data-status="canary_failed"' in failed and "canary failed" in failed


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"canary": "0"}, "canary", "must be a whole number from 1 to"),
        ({"canary": "2.5"}, "canary", "must be a whole number"),
        ({"canary": "8"}, "canary", "is 8, but the selection holds only 7"),
        ({"canary": "2", "canary_success": "1.2"}, "canary_success", "must be a number from 0 to 1"),
        ({"start_at": "2020-01-01T02:00"}, "start_at", "is in the past"),
        ({"start_at": "tomorrow"}, "start_at", "must be a date and a time"),
    ],
)
def test_a_bad_canary_or_time_shows_the_form_again_with_the_error(operator_client, fields, field, message):
    letters(7)
    _, form = confirm_form(operator_client, **fields)

    response = operator_client.post(reverse("console:bulk-start"), form)

    assert response.status_code == 400
    assert message in response.context["errors"][field]
    assert message in response.content.decode()
    assert not BulkAction.objects.exists()


def test_a_start_time_from_the_form_is_read_in_the_consoles_zone(operator_client):
    letters(2)
    when = (timezone.now() + timedelta(hours=3)).replace(second=0, microsecond=0)
    _, form = confirm_form(operator_client, start_at=local_input(when))

    response = operator_client.post(reverse("console:bulk-start"), form, follow=True)

    bulk = BulkAction.objects.get()
    assert (bulk.status, bulk.start_at) == ("scheduled", when)
    page = response.content.decode()
    local = when.astimezone(SHANGHAI).strftime("%Y-%m-%d %H:%M:%S")
    assert f"Bulk replay of 2 dead letters scheduled for {local} (UTC+08:00)." in page
    assert (f"Scheduled: starts at <time datetime=\"{when.astimezone(SHANGHAI).isoformat()}\">{local}</time>"
            in page)
    assert "Cancel the scheduled run" in page


def test_replay_later_from_the_dead_letter_and_cancel_it_there(operator_client):
    letter = make_dead_letter()
    detail = reverse("console:deadletter-detail", args=[letter.pk])
    later = reverse("console:deadletter-replay-later", args=[letter.pk])
    assert f'href="{later}"' in operator_client.get(detail).content.decode()
    form_page = operator_client.get(later).content.decode()
    assert 'type="datetime-local" name="start_at"' in form_page and " required" in form_page

    when = (timezone.now() + timedelta(days=1)).replace(second=0, microsecond=0)
    response = operator_client.post(later, {"start_at": local_input(when), "reason": "after the deploy"},
                                    follow=True)

    bulk = BulkAction.objects.get()
    assert (bulk.status, bulk.selected_ids, bulk.start_at, bulk.reason) == (
        "scheduled", [letter.pk], when, "after the deploy")
    assert response.redirect_chain[-1][0] == detail
    page = response.content.decode()
    local = when.astimezone(SHANGHAI).strftime("%Y-%m-%d %H:%M")
    assert f"Dead letter {letter.pk} will be replayed at {local} (UTC+08:00)" in page
    assert "Replay scheduled</a> for" in page and "Cancel the scheduled replay" in page
    assert DeadLetter.objects.get(pk=letter.pk).status == "open"

    cancelled = operator_client.post(reverse("console:bulk-cancel", args=[bulk.public_id]),
                                     {"back": "letter"})
    assert cancelled["Location"] == detail
    assert BulkAction.objects.get().status == BulkActionStatus.CANCELLED
    assert "Cancel the scheduled replay" not in operator_client.get(detail).content.decode()
    assert AuditEntry.objects.filter(action="bulk_cancel").count() == 1


def test_replay_later_refuses_a_missing_or_past_time(operator_client):
    letter = make_dead_letter()
    later = reverse("console:deadletter-replay-later", args=[letter.pk])
    for value, message in (("", "say when"), ("2020-01-01T02:00", "is in the past")):
        response = operator_client.post(later, {"start_at": value})
        assert response.status_code == 400 and message in response.content.decode()
    assert not BulkAction.objects.exists()


def test_the_scheduled_list_shows_the_waiting_runs_soonest_first_with_cancel(operator_client):
    letters(3)
    later = start("replay", start_at=timezone.now() + timedelta(hours=5), reason="later")
    sooner = start("archive", start_at=timezone.now() + timedelta(hours=1), reason="sooner")
    start("archive", reason="now")
    url = reverse("console:bulk-list")

    everything = operator_client.get(url)
    assert [b.pk for b in everything.context["page"].object_list][:3] != []
    assert "Scheduled (2)" in everything.content.decode()
    scheduled = operator_client.get(url, {"state": "scheduled"})
    assert [b.pk for b in scheduled.context["page"].object_list] == [sooner.pk, later.pk]
    assert "Starts (UTC+08:00)" in scheduled.content.decode()
    assert operator_client.get(url, {"state": "bogus"}).status_code == 400

    response = operator_client.post(reverse("console:bulk-cancel", args=[sooner.public_id]),
                                    {"back": "scheduled"})
    assert response["Location"] == f"{url}?state=scheduled"
    scheduled_page = operator_client.get(url, {"state": "scheduled"}).context["page"]
    assert [b.pk for b in scheduled_page.object_list] == [later.pk]


def test_replay_later_of_a_letter_already_replayed_says_so(operator_client):
    letter = make_dead_letter()
    operator_client.post(reverse("console:deadletter-replay", args=[letter.pk]), {"reason": "now"})

    response = operator_client.get(reverse("console:deadletter-replay-later", args=[letter.pk]))

    assert response.status_code == 409
    assert "Already replayed by alice" in response.content.decode()
    assert not BulkAction.objects.exists()
