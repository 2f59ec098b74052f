"""Every console page, with data on it, in Simplified Chinese and in English: nothing left untranslated.

In zh-hans no visible text (nor title/aria-label/placeholder) may still say an English catalogue msgid;
in English no visible text may hold a Chinese character. User data is left out (see visible_text).
"""

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.template.loader import render_to_string
from django.test import RequestFactory
from django.utils import timezone, translation

from deadletters.audit import record_audit
from deadletters.models import (
    Alert,
    AlertMessage,
    AlertStatus,
    BulkAction,
    BulkActionStatus,
    DeadLetterStatus,
)
from deadletters.services.kind_pauses import pause_kind
from deadletters.services.replay import replay_dead_letter
from reports.models import ReportBatch, TaskAttempt, TaskStatus
from tests.conftest import operators_group
from tests.console.visible_text import (
    english_fragments,
    english_words,
    message_texts,
    untranslated,
    visible_texts,
    with_cjk,
)
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db

CHAINED_TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/reports/kinds/http_export.py", line 40, in generate
    answer = fetch(url)
  File "/usr/lib/python3.11/site-packages/requests/api.py", line 73, in get
    return request("get", url)
ConnectionError: upstream closed

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/srv/app/reports/worker/workhorse.py", line 88, in run
    kind.generate(params)
reports.errors.TransientError: orders API unreachable
"""


@pytest.fixture
def world(client):
    """A console with something on every page: letters in each state, tasks, a batch, bulk runs,
    alerts, audit entries, a paused kind, and a signed-in operator."""
    operator = get_user_model().objects.create_user("opwei", "op@example.invalid", "pw-opwei-123",
                                                    is_staff=True)
    operator.groups.add(operators_group())
    now = timezone.now()
    batch = ReportBatch.objects.create(name="monthclose", total=4, submitted_by="erpclient")
    open_task = make_task(
        kind="http_export", status=TaskStatus.DEAD, attempt=3, batch=batch, finished_at=now,
        submitted_by="erpclient", last_error="reports.errors.TransientError: orders API unreachable",
    )
    letter = make_dead_letter(
        task=open_task, error_type="reports.errors.TransientError", error_message="orders API unreachable",
        traceback=CHAINED_TRACEBACK,
    )
    TaskAttempt.objects.filter(task=open_task, number=1).update(traceback=CHAINED_TRACEBACK)
    for _ in range(2):
        make_dead_letter(error_type="reports.errors.TransientError", error_message="orders API unreachable")
    archived = make_dead_letter(error_message="gone stale", status=DeadLetterStatus.ARCHIVED, archived_at=now)
    discarded = make_dead_letter(error_message="unwanted", status=DeadLetterStatus.DISCARDED,
                                 discarded_at=now)
    replayed = make_dead_letter(error_type="reports.errors.PermanentError", error_message="region nowhere")
    replay_dead_letter(dead_letter_id=replayed.pk, actor="opwei", ip_address="192.0.2.1",
                       reason="fixed region")
    make_task(status=TaskStatus.PENDING, batch=batch, next_retry_at=now + timedelta(seconds=30))
    make_task(status=TaskStatus.RUNNING, started_at=now, lease_expires_at=now + timedelta(seconds=12))
    make_task(status=TaskStatus.RETRYING, attempt=1, next_retry_at=now + timedelta(seconds=10),
              last_error="x: y")
    make_task(status=TaskStatus.DONE, batch=batch, finished_at=now)
    message = AlertMessage.objects.create(title="t", status=AlertStatus.FAILED, attempts=2,
                                          last_error="errcode 310000")
    Alert.objects.create(dead_letter=letter, status=AlertStatus.FAILED, message=message)
    Alert.objects.create(dead_letter=letter, status=AlertStatus.SKIPPED)
    Alert.objects.create(dead_letter=letter, status=AlertStatus.PENDING)
    paused = BulkAction.objects.create(
        action="replay", status=BulkActionStatus.PAUSED, actor="opwei", ip_address="192.0.2.1",
        reason="after fix", total=10, processed=4, succeeded=3, skipped=1, rate_per_second=20,
        pause_threshold=0.5, filters={"filter": {"status": "open"}, "max_id": letter.pk},
        paused_reason="stopped",
    )
    failed = BulkAction.objects.create(
        action="archive", status=BulkActionStatus.FAILED, actor="opwei", total=3, processed=1, succeeded=1,
        rate_per_second=5, selected_ids=[letter.pk], filters={"max_id": letter.pk}, error="boom",
    )
    scheduled = BulkAction.objects.create(
        action="replay", status=BulkActionStatus.SCHEDULED, actor="opwei", reason="after fix", total=5,
        rate_per_second=20, filters={"filter": {"status": "open"}, "max_id": letter.pk},
        start_at=timezone.now() + timedelta(hours=2), canary_size=2, canary_success=0.8,
        canary_phase="pending",
    )
    stopped = BulkAction.objects.create(
        action="replay", status=BulkActionStatus.CANARY_FAILED, actor="opwei", reason="after fix", total=5,
        processed=2, succeeded=2, rate_per_second=20,
        filters={"filter": {"status": "open"}, "max_id": letter.pk},
        canary_size=2, canary_success=0.8, canary_phase="failed", finished_at=timezone.now(),
        canary_result={"verdict": "failed", "replayed": 2, "done": 0, "died_again": 1, "unfinished": 1,
                       "needed": 2, "causes": [], "reason": "Canary failed"},
    )
    record_audit(action="bulk_replay", actor="opwei", item_count=10, reason="after fix",
                 details={"bulk": str(paused.public_id)})
    record_audit(action="bulk_canary_failed", source="system", item_count=2,
                 details={"bulk": str(stopped.public_id)})
    record_audit(action="archive", actor="opwei", dead_letter=archived, task=archived.task, reason="stale")
    record_audit(action="discard", actor="", source="system", dead_letter=discarded, task=discarded.task)
    pause_kind(kind="probe", actor="opwei", reason="downstream maintenance")
    client.force_login(operator)
    return {
        "client": client,
        "letter": letter,
        "archived": archived,
        "replayed": replayed,
        "task": open_task,
        "batch": batch,
        "bulks": (paused, failed),
        "plans": (scheduled, stopped),
        "data": [
            "opwei", "erpclient", "monthclose", "http_export", "sales_summary", "probe", "192.0.2.1",
            "fixed region", "after fix", "stale", "downstream maintenance", "orders API unreachable",
            "gone stale", "unwanted", "region nowhere", "errcode 310000", "boom", "stopped",
            "reports.errors.TransientError", "reports.errors.PermanentError", "colour",
        ],
    }


def _pages(world) -> list[str]:
    letter, task, batch = world["letter"], world["task"], world["batch"]
    paused, failed = world["bulks"]
    return [
        "/console/",
        "/console/dead-letters/",
        "/console/dead-letters/?status=all",
        "/console/dead-letters/?status=all&kind=http_export&q=orders",
        "/console/dead-letters/?created_from=not-a-date",
        "/console/dead-letters/?status=archived&kind=nothing_here",
        "/console/dead-letters/groups/",
        "/console/dead-letters/groups/?status=all",
        f"/console/dead-letters/{letter.pk}/",
        f"/console/dead-letters/{world['archived'].pk}/",
        f"/console/dead-letters/{world['replayed'].pk}/",
        f"/console/dead-letters/{letter.pk}/replay/",
        f"/console/dead-letters/{letter.pk}/replay/edit/",
        f"/console/dead-letters/{world['replayed'].pk}/replay/",
        "/console/tasks/",
        "/console/tasks/?status=nonsense&batch=zz",
        f"/console/tasks/{task.public_id}/",
        f"/console/tasks/{world['replayed'].task.public_id}/",
        "/console/audit/",
        "/console/audit/?action=nothing",
        "/console/batches/",
        f"/console/batches/{batch.public_id}/",
        "/console/kinds/",
        "/console/bulk/",
        f"/console/bulk/{paused.public_id}/",
        f"/console/bulk/{failed.public_id}/",
        "/console/bulk/?state=scheduled",
        f"/console/bulk/{world['plans'][0].public_id}/",
        f"/console/bulk/{world['plans'][1].public_id}/",
        f"/console/dead-letters/{letter.pk}/replay/later/",
        "/console/running/",
        "/console/retrying/",
        "/console/alerts/snoozes/",
        f"/console/dead-letters/{letter.pk}/discard/",
        f"/console/nothing-here-{uuid.uuid4().hex[:6]}/",
    ]


def _posts(world) -> list[tuple[str, dict]]:
    """Actions whose answer (a page, or a message on the page they lead to) is console wording too."""
    letter = world["letter"]
    paused, _failed = world["bulks"]
    return [
        ("/console/bulk/preview/", {"action": "replay", "scope": "filter", "filter_qs": "status=open"}),
        ("/console/bulk/preview/",
         {"action": "archive", "scope": "selected", "ids": [letter.pk, world["archived"].pk]}),
        ("/console/bulk/preview/", {"action": "restore", "scope": "filter", "filter_qs": "status=open"}),
        ("/console/bulk/preview/", {"action": "replay", "scope": "nowhere"}),
        ("/console/bulk/start/",
         {"action": "replay", "scope": "filter", "filter_qs": "status=open", "rate_per_second": "-1"}),
        ("/console/bulk/start/",
         {"action": "replay", "scope": "filter", "filter_qs": "status=open", "canary": "0",
          "start_at": "2020-01-01T02:00"}),
        (f"/console/dead-letters/{letter.pk}/replay/later/", {"start_at": "", "reason": ""}),
        (f"/console/dead-letters/{letter.pk}/replay/edit/",
         {"params": '{"url": 5, "colour": 1}', "reason": ""}),
        (f"/console/dead-letters/{letter.pk}/replay/edit/", {"params": "[1]", "reason": ""}),
        (f"/console/dead-letters/{world['archived'].pk}/archive/", {"reason": ""}),
        (f"/console/bulk/{paused.public_id}/rate/", {"rate_per_second": "0"}),
        ("/console/kinds/probe/pause/", {"reason": "x" * 3000}),
        ("/console/kinds/sales_summary/pause/", {"reason": "quarter close"}),
        ("/console/kinds/probe/resume/", {}),
        (f"/console/bulk/{paused.public_id}/pause/", {}),
        (f"/console/dead-letters/{letter.pk}/archive/", {"reason": "seen"}),
        (f"/console/dead-letters/{letter.pk}/restore/", {"reason": ""}),
        (f"/console/dead-letters/{letter.pk}/replay/", {"reason": "try again"}),
        (f"/console/dead-letters/{letter.pk}/replay/", {"reason": "again"}),
    ]


def _answers(world, language: str):
    client = world["client"]
    headers = {"HTTP_ACCEPT_LANGUAGE": language}
    for path in _pages(world):
        yield path, client.get(path, **headers)
    for path, data in _posts(world):
        yield f"POST {path}", client.post(path, data, follow=True, **headers)
    client.logout()
    yield "login", client.get("/console/login/?next=/console/", **headers)
    yield "login failed", client.post("/console/login/", {"username": "opwei", "password": "wrong"},
                                      **headers)
    client.force_login(get_user_model().objects.create_user("visitor", "v@example.invalid", "pw-visitor-1"))
    yield "403", client.get("/console/", **headers)
    client.logout()
    for n in range(6):
        locked = client.post("/console/login/", {"username": "opwei", "password": f"guess-{n}"},
                             REMOTE_ADDR="203.0.113.77", **headers)
    assert locked.status_code == 429
    yield "429", locked


def _statuses_seen(answers) -> set[int]:
    return {response.status_code for _, response in answers}


def test_every_console_page_in_chinese_shows_no_english_catalogue_text(world):
    fragments = english_fragments()
    answers = list(_answers(world, "zh-hans"))
    problems = []
    for name, response in answers:
        body = response.content.decode()
        assert '<html lang="zh-Hans">' in body, name
        problems += [(name, *found) for found in untranslated(visible_texts(body), fragments, world["data"])]
        # Messages and alerts: any English word, in the catalogue or not (a service's text).
        problems += [(name, *found) for found in english_words(message_texts(body), world["data"])]
    assert not problems, "\n".join(f"{name}: {fragment!r} in {text!r}" for name, text, fragment in problems)
    assert {200, 400, 403, 404, 409, 429} <= _statuses_seen(answers)


def test_every_console_page_in_english_shows_no_chinese(world):
    answers = list(_answers(world, "en"))
    problems = []
    for name, response in answers:
        body = response.content.decode()
        assert '<html lang="en">' in body, name
        problems += [(name, text) for text in with_cjk(visible_texts(body))]
    assert not problems, "\n".join(f"{name}: {text!r}" for name, text in problems)
    assert {200, 400, 403, 404, 409, 429} <= _statuses_seen(answers)


@pytest.mark.parametrize("language", ["zh-hans", "en"])
def test_the_redis_outage_page_speaks_the_page_language(world, language):
    request = RequestFactory().get("/console/")
    request.user = get_user_model().objects.get(username="opwei")
    with translation.override(language):
        body = render_to_string("503.html", request=request)
    texts = visible_texts(body)
    if language == "en":
        assert not with_cjk(texts) and "Temporarily unavailable" in body
    else:
        assert not untranslated(texts, english_fragments(), []) and "暂时不可用" in body


def test_the_walk_sees_an_untranslated_string(world):
    """The check itself: an English sentence from the catalogue on a Chinese page is reported."""
    html = ('<html lang="zh-Hans"><body><p>仪表盘</p><p>No open dead letters.</p>'
            '<p class="msg">No tasks.</p></body></html>')
    found = untranslated(visible_texts(html), english_fragments(), [])
    assert [fragment for _, fragment in found] == ["No open dead letters"]
