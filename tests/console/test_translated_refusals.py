"""What the services say through the console, in Chinese: every refusal, validation error and
"done" message an operator can provoke, triggered for real (a snooze with a bad duration, a replay
of a letter already replayed, a 409 on a task control, a bulk start with a bad filter, ...).

In zh-hans each must show a message and no English word in it (not only the catalogue's msgids: a
message a service raised without gettext is caught too); in English, no Chinese character.
"""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from deadletters.alerts.snooze import lift_snooze, snooze_alerts
from deadletters.bulk.pause_reasons import paused_automatically, paused_by
from deadletters.models import BulkAction, BulkActionStatus, DeadLetterStatus
from deadletters.services.replay import replay_dead_letter
from reports.kinds import KINDS
from reports.models import AttemptOutcome, TaskAttempt, TaskStatus
from reports.services.controls import stopped_message
from tests.conftest import operators_group
from tests.console.visible_text import CJK, english_words, message_texts, visible_texts, with_cjk
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def scene(client):
    operator = get_user_model().objects.create_user("opwei", "op@example.invalid", "pw-opwei-123",
                                                    is_staff=True)
    operator.groups.add(operators_group())
    now = timezone.now()
    letter = make_dead_letter(error_message="orders API unreachable")
    replayed = make_dead_letter(error_message="region nowhere")
    replay_dead_letter(dead_letter_id=replayed.pk, actor="colleague", ip_address=None, reason="fixed")
    mine = make_dead_letter(error_message="mine")
    replay_dead_letter(dead_letter_id=mine.pk, actor="opwei", ip_address=None, reason="fixed")
    archived = make_dead_letter(status=DeadLetterStatus.ARCHIVED, archived_at=now)
    export = make_dead_letter(
        task=make_task(kind="http_export", status=TaskStatus.DEAD, attempt=1, finished_at=now,
                       params={"url": "https://example.com/x"})
    )
    running = make_task(status=TaskStatus.RUNNING, attempt=1, started_at=now,
                        lease_expires_at=now + timedelta(seconds=30))
    TaskAttempt.objects.create(task=running, number=1, started_at=now, worker="host-a pid 42")
    pending = make_task(status=TaskStatus.PENDING)
    stopped = make_task(status=TaskStatus.CANCELLED, attempt=1, finished_at=now,
                        last_error=stopped_message("ordered twice"))
    TaskAttempt.objects.create(
        task=stopped, number=1, started_at=now, finished_at=now, outcome=AttemptOutcome.STOPPED,
        error_type="stopped", error_message=stopped_message("ordered twice"),
    )
    completed = BulkAction.objects.create(action="archive", status=BulkActionStatus.COMPLETED, total=1,
                                          processed=1)
    paused = BulkAction.objects.create(
        action="replay", status=BulkActionStatus.PAUSED, total=10, processed=4,
        paused_reason=paused_by("opwei"),
    )
    auto = BulkAction.objects.create(
        action="replay", status=BulkActionStatus.PAUSED, total=50, processed=40, pause_threshold=0.5,
        paused_reason=paused_automatically(died_again=30, finished=40, ratio=0.75, threshold=0.5),
    )
    ended = snooze_alerts(kind="probe", minutes=5, reason="noise", actor="opwei")
    lift_snooze(snooze_id=ended.pk, actor="opwei")
    client.force_login(operator)
    params = {name for kind in KINDS.values() for name in (p.name for p in kind.params)}
    return {
        "client": client, "letter": letter, "replayed": replayed, "mine": mine, "archived": archived,
        "export": export, "running": running, "pending": pending, "stopped": stopped, "completed": completed,
        "paused": paused, "auto": auto, "ended_snooze": ended,
        # What the operator typed or the data holds: shown as it is in either language.
        "data": ["opwei", "colleague", "yesterday", "nonsense", "nowhere", "zz", "nope", "abc", "probe",
                 "http_export", "sales_summary", "ordered twice", "colour", "10.0.0.5:8080", "example.com",
                 "x" * 201, *sorted(params, key=len, reverse=True)],
    }  # fmt: skip


def _requests(scene) -> list[tuple[str, str, str, dict]]:
    """(name, method, path, data): each provokes one message from a service."""
    letter, replayed, mine, archived = scene["letter"], scene["replayed"], scene["mine"], scene["archived"]
    running, pending = scene["running"].public_id, scene["pending"].public_id
    completed, paused = scene["completed"].public_id, scene["paused"].public_id
    snooze = "/console/alerts/snooze/"
    bulk_start = {"action": "replay", "scope": "filter", "reason": "fixed", "request_token": ""}
    return [
        ("snooze: minutes not a number", "POST", snooze,
         {"kind": "probe", "minutes": "soon", "reason": "noise"}),
        ("snooze: zero minutes", "POST", snooze, {"kind": "probe", "minutes": "0", "reason": "noise"}),
        ("snooze: over a week", "POST", snooze, {"kind": "probe", "minutes": "99999", "reason": "noise"}),
        ("snooze: no reason", "POST", snooze, {"kind": "probe", "minutes": "30", "reason": ""}),
        ("snooze: cause and kind", "POST", snooze,
         {"kind": "probe", "fingerprint": "a" * 40, "minutes": "30", "reason": "r"}),
        ("snooze: bad cause", "POST", snooze, {"fingerprint": "zz", "minutes": "30", "reason": "r"}),
        ("snooze: long kind", "POST", snooze, {"kind": "k" * 65, "minutes": "30", "reason": "r"}),
        ("snooze: done", "POST", snooze, {"kind": "probe", "minutes": "30", "reason": "noise"}),
        ("snooze: lifted twice", "POST", f"/console/alerts/snoozes/{scene['ended_snooze'].pk}/lift/", {}),
        ("replay: replayed by someone else", "GET", f"/console/dead-letters/{replayed.pk}/replay/", {}),
        ("replay: replayed, posted", "POST", f"/console/dead-letters/{replayed.pk}/replay/",
         {"reason": "again"}),
        ("replay: my own second click", "POST", f"/console/dead-letters/{mine.pk}/replay/",
         {"reason": "again"}),
        ("replay edit: replayed", "GET", f"/console/dead-letters/{replayed.pk}/replay/edit/", {}),
        ("replay edit: not JSON", "POST", f"/console/dead-letters/{letter.pk}/replay/edit/",
         {"params": '{"sleep_seconds": 1,'}),
        ("replay edit: not an object", "POST", f"/console/dead-letters/{letter.pk}/replay/edit/",
         {"params": "[1]"}),
        ("replay edit: bad params", "POST", f"/console/dead-letters/{letter.pk}/replay/edit/",
         {"params": '{"sleep_seconds": -5, "colour": 1}'}),
        ("replay edit: too big", "POST", f"/console/dead-letters/{letter.pk}/replay/edit/",
         {"params": '{"fail_message": "%s"}' % ("y" * 70000)}),
        ("replay edit: host not allowed", "POST", f"/console/dead-letters/{scene['export'].pk}/replay/edit/",
         {"params": '{"url": "http://10.0.0.5:8080/x"}'}),
        ("replay edit: password in the url", "POST",
         f"/console/dead-letters/{scene['export'].pk}/replay/edit/", {"params": '{"url": "http://a:b@example.com/x"}'}),
        ("replay edit: not a url", "POST", f"/console/dead-letters/{scene['export'].pk}/replay/edit/",
         {"params": '{"url": "ftp://example.com/x"}'}),
        ("archive: archived already", "POST", f"/console/dead-letters/{archived.pk}/archive/",
         {"reason": "again"}),
        ("restore: open", "POST", f"/console/dead-letters/{letter.pk}/restore/", {}),
        ("discard: archived", "GET", f"/console/dead-letters/{archived.pk}/discard/", {}),
        ("archive: reason too long", "POST", f"/console/dead-letters/{letter.pk}/archive/",
         {"reason": "x" * 2001}),
        ("cancel: running", "POST", f"/console/tasks/{running}/cancel/", {"reason": "r"}),
        ("retry now: pending", "POST", f"/console/tasks/{pending}/retry-now/", {}),
        ("stop: not that attempt", "POST", f"/console/tasks/{running}/stop/",
         {"attempt": "5", "then": "cancel", "confirmed": "yes"}),
        ("stop: bad form", "POST", f"/console/tasks/{running}/stop/", {"attempt": "x", "then": "explode"}),
        ("bulk start: bad date", "POST", "/console/bulk/start/",
         {**bulk_start, "filter_qs": "created_from=yesterday"}),
        ("bulk start: bad status", "POST", "/console/bulk/start/",
         {**bulk_start, "filter_qs": "status=nonsense"}),
        ("bulk start: dates reversed", "POST", "/console/bulk/start/",
         {**bulk_start, "filter_qs": "created_from=2026-05-02&created_to=2026-05-01"}),
        ("bulk start: bad batch", "POST", "/console/bulk/start/", {**bulk_start, "filter_qs": "batch=nope"}),
        ("bulk start: bad cause", "POST", "/console/bulk/start/",
         {**bulk_start, "filter_qs": "fingerprint=zz"}),
        ("bulk start: bad rate", "POST", "/console/bulk/start/",
         {**bulk_start, "filter_qs": "kind=probe", "rate_per_second": "-1", "pause_threshold": "2"}),
        ("bulk start: rate not a number", "POST", "/console/bulk/start/",
         {**bulk_start, "filter_qs": "kind=probe", "rate_per_second": "abc", "pause_threshold": "abc"}),
        ("bulk preview: no scope", "POST", "/console/bulk/preview/",
         {"action": "replay", "scope": "nowhere"}),
        ("bulk preview: no action", "POST", "/console/bulk/preview/",
         {"action": "nonsense", "scope": "filter"}),
        ("bulk preview: nothing ticked", "POST", "/console/bulk/preview/",
         {"action": "archive", "scope": "selected"}),
        ("bulk preview: bad ids", "POST", "/console/bulk/preview/",
         {"action": "archive", "scope": "selected", "ids": ["abc"]}),
        ("bulk rate: not a number", "POST", f"/console/bulk/{paused}/rate/", {"rate_per_second": "abc"}),
        ("bulk rate: finished", "POST", f"/console/bulk/{completed}/rate/", {"rate_per_second": "5"}),
        ("bulk pause: finished", "POST", f"/console/bulk/{completed}/pause/", {}),
        ("bulk resume: finished", "POST", f"/console/bulk/{completed}/resume/", {}),
        ("bulk cancel: finished", "POST", f"/console/bulk/{completed}/cancel/", {}),
        ("bulk paused by an operator", "GET", f"/console/bulk/{paused}/", {}),
        ("bulk paused automatically", "GET", f"/console/bulk/{scene['auto'].public_id}/", {}),
        ("kind pause: reason too long", "POST", "/console/kinds/probe/pause/", {"reason": "x" * 3000}),
        ("kind resume: not paused", "POST", "/console/kinds/sales_summary/resume/", {}),
        ("list: bad date", "GET", "/console/dead-letters/?created_from=yesterday", {}),
        ("list: bad status", "GET", "/console/dead-letters/?status=nonsense", {}),
        ("list: dates reversed", "GET",
         "/console/dead-letters/?created_from=2026-05-02&created_to=2026-05-01", {}),
        ("list: bad batch", "GET", "/console/dead-letters/?batch=nope", {}),
        ("list: long search", "GET", "/console/dead-letters/?q=" + "x" * 201, {}),
        ("groups: bad cause", "GET", "/console/dead-letters/groups/?fingerprint=zz", {}),
        ("tasks: bad filter", "GET", "/console/tasks/?status=nonsense&batch=zz", {}),
    ]  # fmt: skip


def _reason_required_requests(scene) -> list[tuple[str, str, str, dict]]:
    letter = scene["letter"]
    return [
        ("replay without a reason", "POST", f"/console/dead-letters/{letter.pk}/replay/", {"reason": ""}),
        ("archive without a reason", "POST", f"/console/dead-letters/{letter.pk}/archive/", {"reason": ""}),
        ("bulk start without a reason", "POST", "/console/bulk/start/",
         {"action": "replay", "scope": "filter", "filter_qs": "kind=probe", "reason": ""}),
    ]  # fmt: skip


def _answers(scene, language, requests):
    client = scene["client"]
    for name, method, path, data in requests:
        if method == "GET":
            response = client.get(path, HTTP_ACCEPT_LANGUAGE=language)
        else:
            response = client.post(path, data, follow=True, HTTP_ACCEPT_LANGUAGE=language)
        yield name, response


def _check(scene, language, requests) -> tuple[list[str], set[int]]:
    problems, statuses = [], set()
    for name, response in _answers(scene, language, requests):
        statuses.add(response.redirect_chain[0][1] if getattr(response, "redirect_chain", None)
                     else response.status_code)
        texts = message_texts(response.content.decode())
        if not texts:
            problems.append(f"{name}: no message on the page")
        elif language == "zh-hans":
            if not with_cjk(texts):
                problems.append(f"{name}: no Chinese in {texts!r}")
            problems += [f"{name}: {word!r} in {text!r}"
                         for text, word in english_words(texts, scene["data"])]
        else:
            problems += [f"{name}: Chinese in {text!r}" for text in with_cjk(texts)]
    return problems, statuses


@pytest.mark.parametrize("language", ["zh-hans", "en"])
def test_every_refusal_and_message_of_the_services_speaks_the_page_language(scene, language):
    problems, statuses = _check(scene, language, _requests(scene))
    assert not problems, "\n".join(problems)
    assert {302, 400, 409} <= statuses


@pytest.mark.parametrize("language", ["zh-hans", "en"])
def test_reason_required_speaks_the_page_language(scene, settings, language):
    settings.DEADLETTER_REQUIRE_REASON = True
    problems, statuses = _check(scene, language, _reason_required_requests(scene))
    assert not problems, "\n".join(problems)
    assert statuses == {400}


def test_stored_system_texts_are_worded_in_chinese(scene):
    """A stop's note and a bulk's pause are stored in English (the API reads them); the pages say them
    in the page's language."""
    client = scene["client"]
    task_page = client.get(f"/console/tasks/{scene['stopped'].public_id}/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    body = task_page.content.decode()
    assert "stopped by an operator" not in body and body.count("被操作员停止：ordered twice") >= 2
    bulk_page = client.get(f"/console/bulk/{scene['auto'].public_id}/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "自动暂停：40 个已结束的重放任务中有 30 个再次失败" in bulk_page.content.decode()
    dashboard = client.get("/console/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "Paused by" not in dashboard and "Paused automatically" not in dashboard


def test_the_nothing_ticked_warning_of_the_bulk_bar_is_in_the_page_language(scene):
    """console.js shows it when a bulk action on the selected rows has none ticked; the words are the
    page's."""
    client = scene["client"]
    for language, expect_chinese in (("zh-hans", True), ("en", False)):
        body = client.get("/console/dead-letters/", HTTP_ACCEPT_LANGUAGE=language).content.decode()
        warning = body.split('data-nothing-ticked="', 1)[1].split('"', 1)[0]
        assert bool(CJK.search(warning)) is expect_chinese and warning


def test_the_check_catches_a_message_raised_without_gettext(scene):
    """The check itself: English that is in no catalogue is still reported."""
    html = ('<ul class="messages"><li class="error">告警未静音：minutes must be a whole number。</li></ul>'
            '<p>Fine here</p>')
    found = english_words(message_texts(html), [])
    assert [word for _, word in found] == ["minutes", "must", "be", "whole", "number"]
    assert visible_texts(html)[-1] == "Fine here"
