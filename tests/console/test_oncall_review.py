"""What a Chinese on-call operator met in the console (issue 36, items 11-18), through the real URLs:
counts that say what replays did, causes named by their error, the Stop that asks first, no
English or "horse" on Chinese pages, a navigation without 403s, 备注 for the operator's note, the
rest of a cause in one action, and params edited as the kind's fields."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from deadletters.audit import record_audit
from deadletters.bulk.schedule import schedule_letter_replay
from deadletters.models import BulkAction, DeadLetterStatus
from deadletters.services.replay import replay_dead_letter
from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
from reports.services.controls import stopped_message
from tests.conftest import operators_group
from tests.console.visible_text import visible_texts
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user("olga", "olga@example.invalid", "pw-123456789",
                                                 is_staff=True)
    user.groups.add(operators_group())
    client = Client()
    client.force_login(user)
    return client


def _client_with(django_user_model, name: str, *codenames: str) -> Client:
    user = django_user_model.objects.create_user(name, f"{name}@example.invalid", "pw-123456789",
                                                 is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def _seen(response) -> str:
    return " ".join(visible_texts(response.content.decode()))


def _cause(n: int, *, message="orders API unreachable", **task_fields) -> list:
    letters = []
    for _ in range(n):
        task = make_task(status=TaskStatus.DEAD, finished_at=timezone.now(), **{"attempt": 3, **task_fields})
        letters.append(make_dead_letter(task=task, error_message=message))
    return letters


def test_stop_names_the_attempt_listed_asks_first_and_defaults_to_retrying(operator):
    task = make_task(
        status=TaskStatus.RUNNING, attempt=4, attempts_before_run=3, max_attempts=6, started_at=timezone.now()
    )
    TaskAttempt.objects.create(task=task, number=4, started_at=task.started_at, worker="w1 horse 812 pid 790")
    stop_url = reverse("console:task-stop", args=[task.public_id])

    running = operator.get(reverse("console:running")).content.decode()
    assert "Stop attempt #4…" in running and "Stop attempt 1" not in running

    asked = operator.post(stop_url, {"attempt": "4", "next": "/console/running/"})
    assert asked.status_code == 200 and ReportTask.objects.get(pk=task.pk).status == TaskStatus.RUNNING
    page = asked.content.decode()
    assert re.search(r'name="then" value="retry" checked', page) and 'value="cancel" checked' not in page
    assert 'name="confirmed" value="yes"' in page and "Stop attempt #4" in page

    operator.post(stop_url, {"attempt": "4", "confirmed": "yes"})  # no choice sent: the safe one
    assert ReportTask.objects.get(pk=task.pk).status != TaskStatus.CANCELLED
    assert TaskAttempt.objects.get(task=task, number=4).outcome == AttemptOutcome.STOPPED


def test_chinese_pages_say_worker_process_and_translate_what_the_system_stored(operator):
    now = timezone.now()
    running = make_task(status=TaskStatus.RUNNING, attempt=1, started_at=now)
    TaskAttempt.objects.create(task=running, number=1, started_at=now, worker="w1 horse 812 pid 790")
    stopped = make_task(status=TaskStatus.CANCELLED, attempt=1, finished_at=now, last_error=stopped_message())
    TaskAttempt.objects.create(
        task=stopped, number=1, started_at=now, finished_at=now, outcome=AttemptOutcome.STOPPED,
        error_type="stopped", error_message=stopped_message(), worker="w1 horse 812 pid 790",
    )
    for action in ("stop", "retry_now", "snooze_alerts"):
        record_audit(action=action, actor="olga", task=stopped)
    record_audit(
        action="bulk_canary_failed", source="system",
        reason="Canary failed: 3 of 3 replayed tasks died again (app.Boom x3), 0 done; "
        "at least 2 (60%) had to succeed.",
        details={"verdict": "failed", "replayed": 3, "done": 0, "died_again": 3, "unfinished": 0, "needed": 2,
                 "causes": [{"error_type": "app.Boom", "count": 3}]},
    )

    pages = {
        "running": operator.get(reverse("console:running"), **ZH),
        "tasks": operator.get(reverse("console:task-list") + "?status=cancelled", **ZH),
        "task": operator.get(reverse("console:task-detail", args=[stopped.public_id]), **ZH),
        "audit": operator.get(reverse("console:audit"), **ZH),
    }
    html = {name: response.content.decode() for name, response in pages.items()}
    seen = {name: _seen(response) for name, response in pages.items()}
    assert all("horse" not in page for page in html.values())
    assert "工作进程 812" in html["running"] and "Worker" not in seen["running"]
    assert "被操作员停止" in html["tasks"] and "stopped by an operator" not in html["tasks"]
    assert "已停止" in seen["task"] and not re.search(r"\bstopped\b", seen["task"])
    for chinese in ("停止尝试", "立即重试", "静音告警", "金丝雀失败"):
        assert chinese in seen["audit"], chinese
    assert "Canary failed" not in html["audit"]
    assert not re.search(r"\b(stop|retry_now|snooze_alerts)\b", seen["audit"])


def test_replay_later_is_in_the_letters_own_audit_trail(operator):
    letter = _cause(1)[0]
    schedule_letter_replay(
        dead_letter_id=letter.pk, start_at=timezone.now() + timedelta(hours=2), actor="olga", ip_address=None,
        reason="after the fix ships",
    )
    page = operator.get(reverse("console:deadletter-detail", args=[letter.pk])).content.decode()
    trail = page[page.index("Audit trail"):]
    assert "replay later" in trail and "after the fix ships" in trail


def test_a_view_only_user_is_offered_only_the_sections_it_may_open(django_user_model):
    viewer = _client_with(django_user_model, "vera", "view_deadletter")
    page = viewer.get(reverse("console:dashboard")).content.decode()
    nav = page[page.index('<nav class="nav"'):page.index("</nav>")]
    links = re.findall(r'href="([^"]+)"', nav)
    assert reverse("console:deadletter-list") in links
    for hidden in ("task-list", "running", "audit", "batch-list", "kind-list", "bulk-list"):
        assert reverse(f"console:{hidden}") not in links, hidden
    assert all(viewer.get(link).status_code == 200 for link in links)


def test_phone_cards_label_their_numbers_and_times_say_soon_or_just_now(operator):
    now = timezone.now()
    make_task(status=TaskStatus.RETRYING, attempt=1, next_retry_at=now + timedelta(seconds=20),
              last_error="x")
    make_task(status=TaskStatus.DONE, attempt=1, finished_at=now)
    letter = _cause(1)[0]

    retrying = operator.get(reverse("console:retrying"), **ZH).content.decode()
    assert "即将" in retrying and "0\xa0分钟" not in retrying
    detail = operator.get(reverse("console:deadletter-detail", args=[letter.pk]), **ZH).content.decode()
    assert "刚刚" in detail and "0\xa0分钟" not in detail
    tasks = operator.get(reverse("console:task-list")).content.decode()
    assert re.search(r'<td class="num" data-label="Attempt">', tasks)
    dashboard = operator.get(reverse("console:dashboard")).content.decode()
    assert 'data-label="Queued"' in dashboard and 'data-label="Failed"' in dashboard


def test_the_operators_note_is_beizhu_beside_the_cause_of_death(operator):
    letter = _cause(1)[0]
    record_audit(action="restore", actor="olga", dead_letter=letter, reason="looked again")
    page = operator.get(reverse("console:deadletter-detail", args=[letter.pk]), **ZH).content.decode()
    assert 'aria-label="重放备注"' in page and "备注（选填）" in page
    assert "<th>备注</th>" in page and "原因（可选）" not in page and 'aria-label="重放原因"' not in page


def test_bulk_pages_count_what_the_replays_did(operator):
    bulk = BulkAction.objects.create(
        action="replay", status="completed", total=3, processed=3, succeeded=3, actor="olga",
        filters={"scope": "selected", "max_id": 10**6}, selected_ids=[],
    )
    for letter in _cause(3):  # replayed, and each task died again
        letter.status, letter.replayed_in = DeadLetterStatus.REPLAYED, bulk
        letter.save(update_fields=["status", "replayed_in"])

    page = _seen(operator.get(reverse("console:bulk-detail", args=[bulk.public_id])))
    assert "3 requeued" in page and "3 done" not in page
    assert "3 requeued · 0 done · 3 died again · 0 not finished yet" in page
    chinese = _seen(operator.get(reverse("console:bulk-detail", args=[bulk.public_id]), **ZH))
    assert "条成功" not in chinese and "3 个再次死亡" in chinese


def test_a_cause_is_named_by_its_error_and_found_by_its_id(operator):
    letters = _cause(2)
    _cause(1, message="another thing went wrong")
    fingerprint = letters[0].fingerprint

    preview = operator.get(reverse("console:bulk-preview") + f"?action=replay&fingerprint={fingerprint}")
    seen = _seen(preview)
    assert preview.status_code == 200 and "TransientError: orders API unreachable" in seen
    assert fingerprint not in seen and not BulkAction.objects.exists()  # a GET changes nothing
    assert re.search(r'id="bulk-count">2<', preview.content.decode())

    operator.post(
        reverse("console:bulk-start"),
        {"action": "archive", "scope": "filter", "filter_qs": f"fingerprint={fingerprint}",
         "request_token": "t1"},
    )
    bulk = BulkAction.objects.get()
    detail = _seen(operator.get(reverse("console:bulk-detail", args=[bulk.public_id])))
    assert "fingerprint=" not in detail and "TransientError: orders API unreachable" in detail

    for typed in (fingerprint, fingerprint[:10]):
        listed = operator.get(reverse("console:deadletter-list") + f"?status=all&q={typed}").content.decode()
        assert all(f"/console/dead-letters/{letter.pk}/" in listed for letter in letters), typed
        assert listed.count('name="ids"') == 2, typed


def test_the_rest_of_a_cause_is_one_action_away_and_a_permanent_one_warns(operator, django_user_model):
    letters = _cause(3)
    replay_dead_letter(dead_letter_id=letters[0].pk, actor="olga", ip_address=None)
    detail = operator.get(reverse("console:deadletter-detail", args=[letters[0].pk])).content.decode()
    scoped = f"/console/bulk/preview/?action=replay&amp;fingerprint={letters[0].fingerprint}"
    assert scoped in detail and "Replay the other 2 open dead letters of this cause" in detail

    listed = operator.get(reverse("console:deadletter-list") + f"?fingerprint={letters[0].fingerprint}")
    assert re.search(r'name="scope" value="filter" checked', listed.content.decode())

    permanent = _cause(2, message="region nowhere", attempt=1)  # died with attempts to spare
    url = reverse("console:bulk-preview") + f"?action=replay&fingerprint={permanent[0].fingerprint}"
    assert "permanent-warning" in operator.get(url).content.decode()
    assert "permanent-warning" not in operator.get(scoped.replace("&amp;", "&")).content.decode()

    viewer = _client_with(django_user_model, "vic", "view_deadletter", "view_bulkaction")
    assert viewer.get(url).status_code == 403


def test_params_are_edited_as_the_kinds_fields_with_json_as_the_fallback(operator):
    task = make_task(
        kind="probe", status=TaskStatus.DEAD, attempt=1, finished_at=timezone.now(),
        params={"sleep_seconds": 0, "fail_permanently": True},
    )
    letter = make_dead_letter(task=task, error_type="reports.errors.PermanentError", error_message="asked to")
    url = reverse("console:deadletter-replay-edit", args=[letter.pk])

    page = operator.get(url).content.decode()
    assert re.search(r'type="checkbox" role="switch" name="param-fail_permanently"[^>]* checked', page)
    assert re.search(r'type="number" name="param-sleep_seconds"[^>]* min="0(\.0)?" max="600(\.0)?"', page)
    assert "Default: false." in page and "Allowed: 0 to 600." in page
    assert 'name="params"' in page and "Edit as JSON instead" in page

    refused = operator.post(url, {"mode": "fields", "param-sleep_seconds": "700",
                                  "param-fail_permanently": "false"})
    assert refused.status_code == 400 and ReportTask.objects.get(pk=task.pk).status == TaskStatus.DEAD
    assert 'value="700"' in refused.content.decode()

    operator.post(url, {"mode": "fields", "param-sleep_seconds": "1", "param-fail_permanently": "false"})
    task.refresh_from_db()
    assert task.status == TaskStatus.PENDING
    assert task.params["fail_permanently"] is False and task.params["sleep_seconds"] == 1
