"""Single-letter console actions: replay (plain and with edited params), archive, discard, restore.

Through the real URLs, views, services and Redis (the RQ queue is read back to count jobs).
"""

import ipaddress
import threading
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from deadletters.models import AuditEntry, DeadLetter, DeadLetterStatus
from reports.models import ReportTask, TaskStatus
from tests.conftest import operators_group
from tests.factories import make_dead_letter, make_task
from transport.queues import get_queue

PROBE_PARAMS = {"sleep_seconds": 0, "fail_attempts": 0, "fail_permanently": False, "write_output": True}


def make_user(django_user_model, username, *, group=True, perms=(), staff=True):
    user = django_user_model.objects.create_user(
        username, f"{username}@example.invalid", "pw-123456789", is_staff=staff
    )
    if group:
        user.groups.add(operators_group())
    for codename in perms:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="deadletters", codename=codename)
        )
    return user


@pytest.fixture
def alice(db, django_user_model):
    return make_user(django_user_model, "alice")


@pytest.fixture
def bob(db, django_user_model):
    return make_user(django_user_model, "bob")


@pytest.fixture
def client_alice(alice):
    client = Client(REMOTE_ADDR="10.1.2.3")
    client.force_login(alice)
    return client


def dead_letter(**task_fields):
    task = make_task(
        status=TaskStatus.DEAD,
        attempt=3,
        finished_at=timezone.now(),
        params=task_fields.pop("params", dict(PROBE_PARAMS)),
        **task_fields,
    )
    return make_dead_letter(task=task)


def queued_job_ids() -> list[str]:
    ids = []
    for name in ("high", "default", "low"):
        ids += get_queue(name).get_job_ids()
    return ids


# Discard asks first: only a POST that says it was confirmed discards.
CONFIRMED = {"confirmed": "yes"}


def url(name, letter):
    return reverse(f"console:deadletter-{name}", args=[letter.pk])


# --- replay --------------------------------------------------------------------------


def test_replay_get_is_a_confirmation_page_and_changes_nothing(client_alice):
    letter = dead_letter()

    response = client_alice.get(url("replay", letter))

    assert response.status_code == 200
    body = response.content.decode()
    assert "Confirm replay" in body and str(letter.task.public_id) in body
    assert 'method="post"' in body and "csrfmiddlewaretoken" in body
    letter.refresh_from_db()
    assert letter.status == DeadLetterStatus.OPEN
    assert ReportTask.objects.get(pk=letter.task_id).status == TaskStatus.DEAD
    assert not AuditEntry.objects.exists()
    assert response["Cache-Control"].startswith("max-age=0")


@pytest.mark.django_db(transaction=True)
def test_replay_post_requeues_once_audits_and_redirects(django_user_model):
    alice = make_user(django_user_model, "alice")
    client = Client(REMOTE_ADDR="10.1.2.3", HTTP_X_FORWARDED_FOR="6.6.6.6")
    client.force_login(alice)
    letter = dead_letter()

    response = client.post(url("replay", letter), {"reason": "db fixed"})

    assert response.status_code == 302
    assert response["Location"] == reverse("console:deadletter-detail", args=[letter.pk])
    task = ReportTask.objects.get(pk=letter.task_id)
    assert task.status == TaskStatus.PENDING and task.max_attempts == 6
    letter.refresh_from_db()
    assert (letter.status, letter.replayed_by) == (DeadLetterStatus.REPLAYED, "alice")
    assert queued_job_ids() == [f"report-{task.pk}-4"]
    [entry] = AuditEntry.objects.filter(action="replay")
    assert (entry.actor, entry.reason, entry.dead_letter_id, entry.item_count) == (
        "alice",
        "db fixed",
        letter.pk,
        1,
    )
    assert entry.ip_address == "10.1.2.3"  # X-Forwarded-For is not trusted by default


def test_trusted_proxy_setting_takes_the_address_the_proxy_appended(client_alice, settings):
    settings.CONSOLE_TRUSTED_PROXY_COUNT = 1
    settings.CONSOLE_TRUSTED_PROXIES = (ipaddress.ip_network("10.1.2.3"),)
    letter = dead_letter()

    client_alice.post(url("archive", letter), HTTP_X_FORWARDED_FOR="6.6.6.6, 192.0.2.7")

    assert AuditEntry.objects.get(action="archive").ip_address == "192.0.2.7"


@pytest.mark.django_db(transaction=True)
def test_double_submitted_replay_makes_one_replay_and_one_job(django_user_model):
    alice = make_user(django_user_model, "alice")
    client = Client()
    client.force_login(alice)
    letter = dead_letter()

    first = client.post(url("replay", letter))
    second = client.post(url("replay", letter), follow=True)

    assert first.status_code == 302
    assert second.status_code == 200
    assert "Already replayed by alice" in second.content.decode()
    assert len(queued_job_ids()) == 1
    assert AuditEntry.objects.filter(action="replay").count() == 1
    assert ReportTask.objects.get(pk=letter.task_id).max_attempts == 6  # one fresh budget, not two


@pytest.mark.django_db(transaction=True)
def test_two_operators_replaying_at_once_make_one_run(django_user_model):
    users = [make_user(django_user_model, "alice"), make_user(django_user_model, "bob")]
    letter = dead_letter()
    barrier = threading.Barrier(2)
    responses = {}

    def replay_as(user):
        client = Client()
        client.force_login(user)
        barrier.wait()
        try:
            responses[user.username] = client.post(url("replay", letter))
        finally:
            connection.close()

    threads = [threading.Thread(target=replay_as, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    codes = sorted(r.status_code for r in responses.values())
    assert codes == [302, 409]
    letter.refresh_from_db()
    winner = letter.replayed_by
    loser = next(r for r in responses.values() if r.status_code == 409).content.decode()
    when = timezone.localtime(letter.replayed_at)
    assert f"Already replayed by {winner} at {when:%Y-%m-%d %H:%M:%S}" in loser
    assert len(queued_job_ids()) == 1
    assert AuditEntry.objects.filter(action="replay").count() == 1


def test_replay_of_a_letter_replayed_by_someone_else_is_409_without_side_effect(client_alice, bob):
    letter = dead_letter()
    from deadletters.services.replay import replay_dead_letter

    replay_dead_letter(dead_letter_id=letter.pk, actor="bob", ip_address=None)
    before = AuditEntry.objects.count()

    for response in (client_alice.get(url("replay", letter)), client_alice.post(url("replay", letter))):
        assert response.status_code == 409
        assert "Already replayed by bob" in response.content.decode()
    assert AuditEntry.objects.count() == before


@pytest.mark.parametrize("status", [TaskStatus.RUNNING, TaskStatus.DONE, TaskStatus.PENDING])
def test_replay_of_a_task_that_is_not_dead_is_409(client_alice, status):
    letter = dead_letter()
    ReportTask.objects.filter(pk=letter.task_id).update(status=status)

    response = client_alice.post(url("replay", letter))

    assert response.status_code == 409
    assert f"The task is {status}, not dead" in response.content.decode()
    letter.refresh_from_db()
    assert letter.status == DeadLetterStatus.OPEN
    assert ReportTask.objects.get(pk=letter.task_id).status == status
    assert not AuditEntry.objects.exists()


def test_params_with_script_are_escaped_on_the_confirm_page(client_alice):
    letter = dead_letter(kind="probe")
    DeadLetter.objects.filter(pk=letter.pk).update(params={"note": "<script>alert(1)</script>"})

    body = client_alice.get(url("replay", letter)).content.decode()

    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


# --- replay with edited params ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_replay_with_edited_params_keeps_the_original_in_the_audit(django_user_model):
    alice = make_user(django_user_model, "alice")
    client = Client()
    client.force_login(alice)
    letter = dead_letter(params=dict(PROBE_PARAMS, fail_attempts=99))

    form = client.get(url("replay-edit", letter))
    assert form.status_code == 200 and "&quot;fail_attempts&quot;: 99" in form.content.decode()
    response = client.post(url("replay-edit", letter), {"params": '{"fail_attempts": 0}', "reason": "typo"})

    assert response.status_code == 302
    task = ReportTask.objects.get(pk=letter.task_id)
    assert task.status == TaskStatus.PENDING and task.params == PROBE_PARAMS
    entry = AuditEntry.objects.get(action="replay")
    assert entry.details["params_diff"] == {
        "before": dict(PROBE_PARAMS, fail_attempts=99),
        "after": PROBE_PARAMS,
    }
    assert entry.reason == "typo"
    letter.refresh_from_db()
    assert letter.params["fail_attempts"] == 99  # the dead letter keeps what died
    assert len(queued_job_ids()) == 1


@pytest.mark.parametrize(
    "raw, error",
    [
        ('{"fail_attempts": "many"}', "fail_attempts: must be an integer"),
        ('{"colour": "red"}', "colour: unknown parameter"),
        ("{not json", "Not valid JSON"),
        ("[1, 2]", "Must be a JSON object"),
        ('{"x": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
    ],
)
def test_invalid_edited_params_rerender_the_form_and_change_nothing(client_alice, raw, error):
    letter = dead_letter()

    response = client_alice.post(url("replay-edit", letter), {"params": raw})

    assert response.status_code == 400
    body = response.content.decode()
    assert error in body
    assert "Replay with these params" in body  # the form again, with what was typed
    task = ReportTask.objects.get(pk=letter.task_id)
    assert task.status == TaskStatus.DEAD and task.params == PROBE_PARAMS
    assert DeadLetter.objects.get(pk=letter.pk).status == DeadLetterStatus.OPEN
    assert not AuditEntry.objects.exists()


# --- archive / discard / restore -------------------------------------------------------


def test_archive_then_restore_with_fresh_retention(client_alice, settings):
    letter = dead_letter()
    DeadLetter.objects.filter(pk=letter.pk).update(expire_at=timezone.now() - timedelta(days=1))

    assert client_alice.post(url("archive", letter), {"reason": "noise"}).status_code == 302
    letter.refresh_from_db()
    assert letter.status == DeadLetterStatus.ARCHIVED and letter.archived_at is not None

    assert client_alice.post(url("restore", letter), {"reason": "needed after all"}).status_code == 302
    letter.refresh_from_db()
    assert letter.status == DeadLetterStatus.OPEN and letter.archived_at is None
    expected = timezone.now() + timedelta(days=settings.DEADLETTER_RETENTION_DAYS)
    assert abs((letter.expire_at - expected).total_seconds()) < 60
    actions = list(AuditEntry.objects.order_by("id").values_list("action", "actor", "reason", "ip_address"))
    assert actions == [
        ("archive", "alice", "noise", "10.1.2.3"),
        ("restore", "alice", "needed after all", "10.1.2.3"),
    ]


def test_discard_then_replay_is_allowed(client_alice):
    letter = dead_letter()

    assert client_alice.post(url("discard", letter), CONFIRMED).status_code == 302
    letter.refresh_from_db()
    assert letter.status == DeadLetterStatus.DISCARDED and letter.discarded_at is not None
    assert client_alice.post(url("replay", letter)).status_code == 302
    assert DeadLetter.objects.get(pk=letter.pk).status == DeadLetterStatus.REPLAYED


@pytest.mark.parametrize(
    "action, status",
    [
        ("archive", DeadLetterStatus.ARCHIVED),
        ("archive", DeadLetterStatus.REPLAYED),
        ("discard", DeadLetterStatus.DISCARDED),
        ("restore", DeadLetterStatus.OPEN),
        ("restore", DeadLetterStatus.REPLAYED),
    ],
)
def test_state_change_from_the_wrong_state_is_409(client_alice, action, status):
    letter = dead_letter()
    DeadLetter.objects.filter(pk=letter.pk).update(status=status)

    response = client_alice.post(url(action, letter), CONFIRMED)

    assert response.status_code == 409
    assert f"is {status}" in response.content.decode()
    assert DeadLetter.objects.get(pk=letter.pk).status == status
    assert not AuditEntry.objects.exists()


# --- bad input and permissions ----------------------------------------------------------


@pytest.mark.parametrize("name", ["archive", "restore"])
def test_post_only_actions_answer_get_with_405(client_alice, name):
    letter = dead_letter()

    assert client_alice.get(url(name, letter)).status_code == 405
    assert DeadLetter.objects.get(pk=letter.pk).status == DeadLetterStatus.OPEN


@pytest.mark.parametrize("name", ["replay", "replay-edit", "archive", "discard", "restore"])
def test_tampered_ids_are_404(client_alice, name):
    letter = dead_letter()

    response = client_alice.post(reverse(f"console:deadletter-{name}", args=[letter.pk + 1000]))

    assert response.status_code == 404
    assert client_alice.post(f"/console/dead-letters/{letter.pk}x/{name}/").status_code == 404


@pytest.mark.parametrize(
    "name, perms",
    [
        ("replay", ("view_deadletter", "archive_deadletter")),
        ("replay-edit", ("view_deadletter", "archive_deadletter")),
        ("archive", ("view_deadletter", "replay_deadletter")),
        ("discard", ("view_deadletter", "replay_deadletter")),
        ("restore", ("view_deadletter", "replay_deadletter")),
    ],
)
def test_each_action_needs_its_own_permission(db, django_user_model, name, perms):
    user = make_user(django_user_model, "viewer", group=False, perms=perms)
    client = Client()
    client.force_login(user)
    letter = dead_letter()
    if name == "restore":
        DeadLetter.objects.filter(pk=letter.pk).update(status=DeadLetterStatus.ARCHIVED)

    assert client.post(url(name, letter)).status_code == 403
    if name.startswith("replay"):
        assert client.get(url(name, letter)).status_code == 403
    assert not AuditEntry.objects.exists()
    assert ReportTask.objects.get(pk=letter.task_id).status == TaskStatus.DEAD


def test_non_staff_gets_403_and_anonymous_goes_to_login(db, django_user_model):
    letter = dead_letter()
    user = make_user(django_user_model, "outsider", staff=False)
    client = Client()
    client.force_login(user)
    assert client.post(url("replay", letter)).status_code == 403

    anonymous = Client().get(url("replay", letter))
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith("/console/login/?next=/console/dead-letters/")


def test_state_changes_need_the_csrf_token(alice):
    letter = dead_letter()
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)

    for name in ("replay", "archive"):
        assert client.post(url(name, letter)).status_code == 403
    assert DeadLetter.objects.get(pk=letter.pk).status == DeadLetterStatus.OPEN


def test_actions_partial_offers_what_fits_the_status_and_permissions(client_alice, db, django_user_model):
    letter = dead_letter()
    detail = reverse("console:deadletter-detail", args=[letter.pk])

    body = client_alice.get(detail).content.decode()
    assert url("replay", letter) in body and url("archive", letter) in body and url("discard", letter) in body
    assert url("restore", letter) not in body

    DeadLetter.objects.filter(pk=letter.pk).update(status=DeadLetterStatus.ARCHIVED)
    body = client_alice.get(detail).content.decode()
    assert url("restore", letter) in body and url("archive", letter) not in body

    viewer = make_user(django_user_model, "viewer", group=False, perms=("view_deadletter",))
    client = Client()
    client.force_login(viewer)
    body = client.get(detail).content.decode()
    assert url("replay", letter) not in body and url("restore", letter) not in body


@pytest.mark.parametrize("name", ["replay", "archive", "discard"])
def test_over_long_reason_is_refused_with_400(client_alice, name):
    letter = dead_letter()

    response = client_alice.post(url(name, letter), {"reason": "r" * 2001, **CONFIRMED})

    assert response.status_code == 400
    assert DeadLetter.objects.get(pk=letter.pk).status == DeadLetterStatus.OPEN
    assert not AuditEntry.objects.exists()


def test_kind_pause_and_resume_audit_the_client_address_behind_trusted_proxies(client, operator, settings):
    settings.CONSOLE_TRUSTED_PROXY_COUNT = 1
    settings.CONSOLE_TRUSTED_PROXIES = (ipaddress.ip_network("10.0.0.0/8"),)
    client.force_login(operator)
    proxied = {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "198.51.100.66, 203.0.113.9"}

    paused = client.post("/console/kinds/probe/pause/", {"reason": "warehouse down"}, **proxied)
    assert paused.status_code == 302
    assert client.post("/console/kinds/probe/resume/", **proxied).status_code == 302

    entries = AuditEntry.objects.filter(action__in=("pause_kind", "resume_kind"))
    assert sorted(entries.values_list("action", "ip_address")) == [
        ("pause_kind", "203.0.113.9"),
        ("resume_kind", "203.0.113.9"),
    ]


def test_discard_asks_first_and_explains_archive_versus_discard(client_alice):
    letter = dead_letter()
    detail = client_alice.get(reverse("console:deadletter-detail", args=[letter.pk])).content.decode()
    # The detail page links the confirmation page; its explanation sits next to the buttons.
    assert f'<a class="btn btn-danger" href="{url("discard", letter)}">Discard…</a>' in detail
    assert "Archive or discard?" in detail and "never archived, never purged" in detail

    for asked in (client_alice.get(url("discard", letter)),
                  client_alice.post(url("discard", letter), {"reason": "noise"})):
        page = asked.content.decode()
        assert asked.status_code == 200
        assert f"Discard dead letter {letter.pk}?" in page and 'name="confirmed" value="yes"' in page
        assert DeadLetter.objects.get(pk=letter.pk).status == DeadLetterStatus.OPEN
    assert ">noise</textarea>" in page  # the reason typed so far is kept
    assert not AuditEntry.objects.exists()

    done = client_alice.post(url("discard", letter), {"reason": "noise", **CONFIRMED})
    assert done.status_code == 302
    assert DeadLetter.objects.get(pk=letter.pk).status == DeadLetterStatus.DISCARDED
    assert AuditEntry.objects.get().reason == "noise"
    again = client_alice.get(url("discard", letter))
    assert again.status_code == 409 and "is discarded" in again.content.decode()
