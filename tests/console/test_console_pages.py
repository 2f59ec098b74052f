"""Console pages (read side): what an operator sees, the htmx partials, and bad input."""

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from config.keyset import capped_count
from deadletters.filters import InvalidFilter, filtered_dead_letters, parse_dead_letter_filters
from deadletters.models import Alert, AlertMessage, AlertStatus, AuditEntry, DeadLetter, DeadLetterStatus
from deadletters.selectors.letters import fingerprint_groups
from deadletters.selectors.stats import deaths_per_hour
from reports.models import ReportBatch, TaskAttempt, TaskStatus
from tests.conftest import operators_group
from tests.deadletters.alerts.test_alert_path import HEARTBEAT_TOKEN, failing_channel
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def op_client(client):
    user = get_user_model().objects.create_user("op", "op@example.invalid", "pw-op-12345", is_staff=True)
    user.groups.add(operators_group())
    client.force_login(user)
    return client


def dead(
    *, kind="probe", error_type="reports.errors.TransientError", error_message="boom", batch=None, **fields
):
    task = make_task(kind=kind, status=TaskStatus.DEAD, attempt=3, batch=batch, finished_at=timezone.now())
    return make_dead_letter(task=task, error_type=error_type, error_message=error_message, **fields)


def text(response) -> str:
    return response.content.decode()


# --- dashboard ----------------------------------------------------------------


def test_dashboard_shows_counts_chart_causes_alerts_and_queues(op_client):
    for _ in range(3):
        dead(error_message="connection refused to db 10.0.0.1")
    dead(error_type="reports.errors.InvalidParams", error_message="region missing")
    make_task(status=TaskStatus.PENDING)
    message = AlertMessage.objects.create(
        title="t", status=AlertStatus.FAILED, last_error="errcode 310000 sign not match"
    )
    Alert.objects.create(status=AlertStatus.FAILED, message=message)

    response = op_client.get("/console/")
    body = text(response)
    assert response.status_code == 200
    assert '<html lang="en">' in body
    assert 'hx-trigger="every 5s"' in body
    assert "<svg" in body and "Last 24 hours" in body and "Last 7 days" in body
    fp = DeadLetter.objects.filter(error_type="reports.errors.TransientError").first().fingerprint
    assert f"/console/dead-letters/?fingerprint={fp}" in body
    assert "Show 3" in body
    assert "sign not match" in body
    assert "Queues and workers" in body and "No workers alive" in body
    assert "Oldest open:" in body
    assert "Redis unreachable" not in body


@pytest.mark.parametrize(
    ("language", "words"),
    [("en", ["Alert channel pager is failing", "Last error code: 401."]),
     ("zh-CN", ["告警渠道 pager 投递失败", "最近的错误码：401。"])],
)
def test_dashboard_names_a_channel_whose_sends_fail(op_client, settings, language, words):
    failing_channel(settings)
    body = text(op_client.get("/console/", HTTP_ACCEPT_LANGUAGE=language))
    [banner] = [p.split("</p>", 1)[0] for p in body.split('class="alert alert-error channel-failing"')[1:]]
    assert all(word in banner for word in words) and "HTTP 401: bad signature" in banner
    assert HEARTBEAT_TOKEN not in body and "hc.invalid" not in body and "pager.invalid" not in body


def test_dashboard_warns_about_letters_the_archiver_takes_soon(op_client):
    dead(expire_at=timezone.now() + timedelta(hours=2))
    dead(expire_at=timezone.now() + timedelta(days=5))
    assert "1 will be auto-archived within 24 h" in text(op_client.get("/console/"))


def test_dashboard_partial_for_htmx_poll(op_client):
    response = op_client.get("/console/", **HTMX)
    body = text(response)
    assert response.status_code == 200
    assert "<html" not in body
    assert "Deaths per hour" in body
    assert response["Cache-Control"].startswith("max-age=0")


@pytest.mark.django_db(transaction=True)
def test_dashboard_shows_live_workers_and_queue_counts(op_client, start_worker):
    from reports.services.enqueue import enqueue_attempt

    worker = start_worker()
    enqueue_attempt(
        task_id=987654, attempt=1, priority="high", timeout=10, at=timezone.now() + timedelta(hours=1)
    )
    body = text(op_client.get("/console/", **HTMX))
    assert "1 worker alive" in body and worker.name in body
    high_row = body.split('<td class="mono">high</td>', 1)[1].split("</tr>", 1)[0]
    assert [cell.split(">")[-1] for cell in high_row.split("</td>")[:4]] == ["0", "1", "0", "0"]


def test_dashboard_survives_unreachable_redis(op_client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = op_client.get("/console/")
    assert response.status_code == 200
    assert "Redis unreachable" in text(response)


def test_deaths_per_hour_buckets_are_grouped_in_the_database():
    now = timezone.now().replace(minute=30, second=0, microsecond=0)
    dead(created_at=now)
    dead(created_at=now - timedelta(minutes=10))
    dead(created_at=now - timedelta(hours=5))
    dead(created_at=now - timedelta(hours=30))  # outside 24 h, inside 7 d
    day = deaths_per_hour(hours=24, now=now)
    assert len(day) == 24
    assert day[-1].count == 2
    assert day[-6].count == 1
    assert sum(b.count for b in day) == 3
    week = deaths_per_hour(hours=24 * 7, now=now)
    assert sum(b.count for b in week) == 4


# --- list ---------------------------------------------------------------------


def test_list_defaults_to_open_and_has_the_bulk_form(op_client):
    open_letter = dead(error_message="open one")
    dead(error_message="archived one", status=DeadLetterStatus.ARCHIVED)
    body = text(op_client.get("/console/dead-letters/"))
    assert "open one" in body and "archived one" not in body
    assert '<form id="bulk-form" method="post"' in body
    assert f'<input type="checkbox" name="ids" value="{open_letter.id}"' in body
    assert 'id="select-all"' in body
    assert '<input type="hidden" name="filter_qs" value="">' in body
    body_all = text(op_client.get("/console/dead-letters/?status=all"))
    assert "archived one" in body_all
    assert '<input type="hidden" name="filter_qs" value="status=all">' in body_all


def test_list_filters_by_fingerprint_kind_error_type_batch_and_dates(op_client):
    batch = ReportBatch.objects.create(name="nightly")
    a = dead(kind="sales_summary", error_message="timeout after 30s", batch=batch)
    b = dead(kind="probe", error_type="reports.errors.InvalidParams", error_message="region 'x' unknown")
    c = dead(kind="probe", error_message="old failure", created_at=timezone.now() - timedelta(days=3))

    def ids(qs):
        body = text(op_client.get(f"/console/dead-letters/?{qs}"))
        return {letter.id for letter in (a, b, c) if f'name="ids" value="{letter.id}"' in body}

    assert ids(f"fingerprint={a.fingerprint}") == {a.id}
    assert ids("kind=probe") == {b.id, c.id}
    assert ids("error_type=reports.errors.InvalidParams") == {b.id}
    assert ids(f"batch={batch.public_id}") == {a.id}
    today = timezone.localdate().isoformat()
    assert ids(f"created_from={today}") == {a.id, b.id}
    assert ids(f"created_to={(timezone.localdate() - timedelta(days=2)).isoformat()}") == {c.id}
    assert ids(f"q={b.task.public_id}") == {b.id}
    assert ids("q=TIMEOUT AFTER") == {a.id}


def _link(body: str, rel: str, base: str) -> str | None:
    marker = f'rel="{rel}" href="{base}'
    if marker not in body:
        return None
    return base + body.split(marker, 1)[1].split('"', 1)[0].replace("&amp;", "&")


def test_list_keyset_pagination_walks_every_row_once_both_ways(op_client, settings):
    settings.CONSOLE_PAGE_SIZE = 3
    base = timezone.now()
    # Pairs share a created_at, so the id tie-breaker matters.
    letters = [dead(error_message=f"m{i}", created_at=base - timedelta(minutes=i // 2)) for i in range(8)]

    def ids_on(body):
        return [
            dl.id
            for dl in sorted(letters, key=lambda d: (d.created_at, d.id), reverse=True)
            if f'name="ids" value="{dl.id}"' in body
        ]

    pages, url = [], "/console/dead-letters/"
    while url:
        body = text(op_client.get(url))
        assert "<strong>8</strong> open dead letters match" in body
        pages.append((url, ids_on(body)))
        next_url = _link(body, "next", "/console/dead-letters/")
        if next_url:
            assert f'hx-get="{next_url.replace("&", "&amp;")}"' in body
        url = next_url
    seen = [i for _, ids in pages for i in ids]
    assert [len(ids) for _, ids in pages] == [3, 3, 2]
    assert sorted(seen) == sorted(dl.id for dl in letters) and len(seen) == len(set(seen))

    # Walking back with "Previous page" shows the same pages.
    body = text(op_client.get(pages[-1][0]))
    for _, expected in reversed(pages[:-1]):
        prev_url = _link(body, "prev", "/console/dead-letters/")
        body = text(op_client.get(prev_url))
        assert ids_on(body) == expected
    assert 'rel="prev"' not in body


def test_list_first_page_polls_for_newer_dead_letters(op_client):
    first = dead(kind="probe", error_message="first")
    body = text(op_client.get("/console/dead-letters/?kind=probe"))
    assert 'id="new-letters"' in body and 'hx-trigger="every 10s"' in body
    poll_url = body.split('id="new-letters" hx-get="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    assert "kind=probe" in poll_url and "newer_than=" in poll_url
    assert "new dead letter" not in text(op_client.get(poll_url, **HTMX))
    dead(kind="probe", error_message="second", created_at=first.created_at + timedelta(seconds=1))
    dead(kind="sales_summary", error_message="other kind", created_at=first.created_at + timedelta(seconds=1))
    banner = text(op_client.get(poll_url, **HTMX))
    assert "1 new dead letter</strong>" in banner and "/console/dead-letters/?kind=probe" in banner
    assert op_client.get("/console/dead-letters/?newer_than=garbage", **HTMX).status_code == 286
    # Later pages and oldest-first do not poll.
    assert 'id="new-letters"' not in text(op_client.get("/console/dead-letters/?sort=oldest"))


def test_list_oldest_first_sort(op_client):
    old = dead(error_message="older", created_at=timezone.now() - timedelta(hours=2))
    new = dead(error_message="newer")
    body = text(op_client.get("/console/dead-letters/?sort=oldest"))
    assert body.index(f'value="{old.id}"') < body.index(f'value="{new.id}"')
    body = text(op_client.get("/console/dead-letters/"))
    assert body.index(f'value="{new.id}"') < body.index(f'value="{old.id}"')


def test_list_partial_for_htmx(op_client):
    dead(error_message="partial row")
    response = op_client.get("/console/dead-letters/?status=open", **HTMX)
    body = text(response)
    assert "<html" not in body and "partial row" in body and 'id="bulk-form"' in body
    # The List / Group-by-cause switch follows the new filters (out-of-band swap).
    assert 'id="view-switch" hx-swap-oob="true"' in body
    assert 'href="/console/dead-letters/groups/?status=open"' not in body  # default status is not repeated
    body = text(op_client.get("/console/dead-letters/?status=all", **HTMX))
    assert 'href="/console/dead-letters/groups/?status=all"' in body
    assert "hx-swap-oob" not in text(op_client.get("/console/dead-letters/"))
    # The address bar gets the canonical link, without the form's empty fields.
    response = op_client.get("/console/dead-letters/?status=open&kind=&error_type=&q=&sort=newest", **HTMX)
    assert response["HX-Push-Url"] == "/console/dead-letters/"
    response = op_client.get("/console/dead-letters/groups/?status=all&kind=&q=", **HTMX)
    assert response["HX-Push-Url"] == "/console/dead-letters/groups/?status=all"


@pytest.mark.parametrize(
    "query",
    [
        "status=exploded",
        "fingerprint=../../etc",
        "batch=not-a-uuid",
        "created_from=yesterday",
        "sort=random",
        "kind=%3Cscript%3E",
        "created_from=2026-05-02&created_to=2026-05-01",
        "created_to=9999-12-31",
        "created_from=0001-01-01",
    ],
)
def test_list_bad_filter_values_get_a_400_page_not_a_500(op_client, query):
    response = op_client.get(f"/console/dead-letters/?{query}")
    assert response.status_code == 400
    assert "This filter cannot be used" in text(response)
    assert "<script>" not in text(response)


def test_bad_filter_in_an_htmx_swap_shows_the_explanation(op_client):
    response = op_client.get("/console/dead-letters/?batch=nope", **HTMX)
    assert response.status_code == 200  # htmx swaps only 2xx answers
    assert "<html" not in text(response) and "Batch: &#x27;nope&#x27; is not a batch id" in text(response)


def test_bad_filter_page_shows_what_was_typed_so_it_can_be_fixed(op_client):
    # Seven hex digits: one short of the shortest fingerprint prefix the filter accepts.
    body = text(op_client.get("/console/dead-letters/?fingerprint=deadbee&kind=probe"))
    assert 'name="fingerprint" value="deadbee"' in body
    assert "Cause: &#x27;deadbee&#x27; is not a fingerprint" in body


def test_list_tampered_cursor_is_ignored_with_a_notice(op_client):
    dead(error_message="still listed")
    crafted = ["%7B%22c%22%3A%220001-01-01T00%3A00%3A00%2B14%3A00%22%2C%22i%22%3A1%7D", "1-2%0A", "%D9%A1-2"]
    for cursor in ["abc", "99999999999999999999-1", "1-99999999999999999999", "-1-2", "%00", *crafted]:
        response = op_client.get(f"/console/dead-letters/?cursor={cursor}")
        assert response.status_code == 200
        body = text(response)
        assert "cursor ignored" in body and "still listed" in body


@pytest.mark.parametrize(
    "url",
    [
        "/console/dead-letters/?q=%00abc",
        "/console/dead-letters/?error_type=a%00b",
        "/console/audit/?actor=%00",
        "/console/tasks/?kind=%00&status=%00",
        "/console/dead-letters/groups/?q=%00",
    ],
)
def test_nul_bytes_in_query_parameters_are_harmless(op_client, url):
    assert op_client.get(url).status_code == 200


def test_list_unknown_params_are_ignored(op_client):
    dead(error_message="visible")
    response = op_client.get("/console/dead-letters/?utm_source=dingtalk&foo=bar")
    assert response.status_code == 200 and "visible" in text(response)


def test_list_empty_states_say_what_to_do(op_client):
    body = text(op_client.get("/console/dead-letters/"))
    assert "No open dead letters" in body and "Nothing to do" in body
    body = text(op_client.get("/console/dead-letters/?kind=sales_summary"))
    assert "No dead letters match these filters" in body and "clear the filters" in body


def test_capped_count_stops_counting_at_the_cap():
    for i in range(5):
        dead(error_message=f"x{i}")
    assert capped_count(DeadLetter.objects.all(), cap=3) == (3, True)
    assert capped_count(DeadLetter.objects.all(), cap=10) == (5, False)


def test_error_messages_and_params_are_escaped_everywhere(op_client):
    evil = "<script>alert(1)</script>"
    task = make_task(status=TaskStatus.DEAD, attempt=1, params={"region": evil})
    letter = make_dead_letter(task=task, error_message=evil, params={"region": evil}, traceback=evil)
    AuditEntry.objects.create(
        actor="op",
        action="replay",
        dead_letter=letter,
        task=task,
        reason=evil,
        details={"params_diff": {"before": {"region": evil}, "after": {"region": "eu"}}},
    )
    for url in [
        "/console/",
        "/console/dead-letters/",
        "/console/dead-letters/groups/",
        f"/console/dead-letters/{letter.id}/",
        "/console/audit/",
        f"/console/tasks/{task.public_id}/",
    ]:
        body = text(op_client.get(url))
        assert "<script>alert(1)" not in body, url
        assert "&lt;script&gt;alert(1)" in body, url


# --- groups -------------------------------------------------------------------


def test_groups_view_counts_each_cause(op_client):
    for i in range(4):
        dead(kind="sales_summary" if i % 2 else "probe", error_message=f"connection refused port {5000 + i}")
    lone = dead(error_type="reports.errors.InvalidParams", error_message="bad region")
    for url in ["/console/dead-letters/groups/", "/console/dead-letters/?view=groups"]:
        body = text(op_client.get(url))
        assert "Show 4" in body and "Show 1" in body
        assert "probe, sales_summary" in body
        assert f"?fingerprint={lone.fingerprint}" in body
        assert body.index("Show 4") < body.index("Show 1")
    groups = fingerprint_groups(parse_dead_letter_filters({}))
    assert [g.count for g in groups] == [4, 1]
    assert groups[0].sample_message.startswith("connection refused port")


def test_groups_partial_and_bad_filter(op_client):
    dead()
    assert "<html" not in text(op_client.get("/console/dead-letters/groups/", **HTMX))
    assert op_client.get("/console/dead-letters/groups/?status=nope").status_code == 400
    assert "This filter cannot be used" in text(
        op_client.get("/console/dead-letters/groups/?status=nope", **HTMX)
    )


# --- detail -------------------------------------------------------------------


def test_detail_tells_what_died_why_and_how_many_others(op_client):
    batch = ReportBatch.objects.create(name="month-end")
    letter = dead(kind="sales_summary", error_message="upstream 503", batch=batch, params={"region": "eu"})
    letter.task.params = {"region": "eu"}
    letter.task.save()
    others = [dead(kind="sales_summary", error_message="upstream 503") for _ in range(2)]
    message = AlertMessage.objects.create(title="x", status=AlertStatus.SENT, sent_at=timezone.now())
    Alert.objects.create(dead_letter=letter, status=AlertStatus.SENT, message=message)
    AuditEntry.objects.create(
        actor="alice", action="archive", dead_letter=letter, task=letter.task, reason="noise"
    )

    response = op_client.get(f"/console/dead-letters/{letter.id}/")
    body = text(response)
    assert response.status_code == 200
    assert str(letter.task.public_id) in body
    assert "upstream 503" in body and "reports.errors.TransientError" in body
    assert "&quot;region&quot;: &quot;eu&quot;" in body
    assert "3</strong> open dead letters with this cause, this one included" in body
    for other in others:
        assert f"/console/dead-letters/{other.id}/" in body
    assert body.count('class="attempt attempt-failed"') == 3
    assert "factory pid 1" in body
    assert "alice" in body and "noise" in body
    assert 'class="badge alert-sent"' in body
    assert 'id="task-state"' in body and "Still dead" in body
    assert 'hx-trigger="every 2s"' not in body  # dead is terminal: no polling
    assert "month-end" in body


def test_detail_of_unknown_or_tampered_id_is_a_404_page(op_client):
    for url in [
        "/console/dead-letters/999999/",
        "/console/dead-letters/99999999999999999999999/",
        "/console/dead-letters/abc/",
        "/console/dead-letters/999999/traceback.txt",
        "/console/dead-letters/99999999999999999999999/traceback.txt",
    ]:
        response = op_client.get(url)
        assert response.status_code == 404, url
        assert "404" in text(response)


def test_huge_traceback_is_cut_for_display_and_kept_in_full(op_client):
    tb = (
        "Traceback (most recent call last):\n"
        + ('  File "x.py", line 1, in f\n' * 400_000)
        + "RuntimeError: end"
    )
    assert len(tb) > 10_000_000
    letter = dead(traceback=tb)
    response = op_client.get(f"/console/dead-letters/{letter.id}/")
    assert response.status_code == 200
    assert len(response.content) < 1_000_000
    assert "Long traceback" in text(response) and "Show full" in text(response)
    raw = op_client.get(f"/console/dead-letters/{letter.id}/traceback.txt")
    assert raw.status_code == 200 and raw["Content-Type"].startswith("text/plain")
    assert raw.content.decode() == tb
    download = op_client.get(f"/console/dead-letters/{letter.id}/traceback.txt?download=1")
    assert download["Content-Disposition"].startswith("attachment")


def test_task_state_polls_while_active_and_stops_when_terminal(op_client, settings, media_root):
    letter = dead()
    task = letter.task
    task.status = TaskStatus.PENDING
    task.max_attempts = 6
    task.save()
    response = op_client.get(f"/console/tasks/{task.public_id}/state/?after={letter.id}", **HTMX)
    assert response.status_code == 200
    assert 'hx-trigger="every 2s"' in text(response)
    detail = text(op_client.get(f"/console/dead-letters/{letter.id}/"))
    assert (
        'hx-trigger="every 2s"' in detail
        and f"/console/tasks/{task.public_id}/state/?after={letter.id}" in detail
    )

    # Replay led to a new death: the partial links to the newer dead letter and stops polling.
    task.status = TaskStatus.DEAD
    task.attempt = 6
    task.save()
    newer = make_dead_letter(task=task, error_message="died again")
    response = op_client.get(f"/console/tasks/{task.public_id}/state/?after={letter.id}", **HTMX)
    assert response.status_code == 286
    assert "Died again" in text(response) and f"/console/dead-letters/{newer.id}/" in text(response)
    assert "every 2s" not in text(response)

    # Or it finished: a download link.
    (media_root / "reports").mkdir(parents=True)
    (media_root / "reports" / "out.csv").write_text("a,b\n1,2\n")
    task.status = TaskStatus.DONE
    task.output_file = "reports/out.csv"
    task.save()
    response = op_client.get(f"/console/tasks/{task.public_id}/state/?after={letter.id}", **HTMX)
    assert response.status_code == 286
    assert f"/console/tasks/{task.public_id}/output" in text(response)


def test_task_state_unknown_task_is_404(op_client):
    assert op_client.get(f"/console/tasks/{uuid.uuid4()}/state/", **HTMX).status_code == 404


# --- audit --------------------------------------------------------------------


def test_audit_log_lists_filters_and_pages(op_client, settings):
    settings.CONSOLE_PAGE_SIZE = 2
    letter = dead()
    now = timezone.now()
    for i, (actor, action) in enumerate([("alice", "replay"), ("bob", "archive"), ("alice", "discard")]):
        AuditEntry.objects.create(
            actor=actor,
            action=action,
            dead_letter=letter,
            task=letter.task,
            ip_address="10.1.2.3",
            item_count=i + 1,
            reason=f"reason {i}",
            created_at=now - timedelta(minutes=i),
            details={"params_diff": {"before": {"region": "us"}, "after": {"region": "eu"}}}
            if i == 0
            else {},
        )
    body = text(op_client.get("/console/audit/"))
    assert "reason 0" in body and "reason 1" in body and "reason 2" not in body
    assert "10.1.2.3" in body and 'rel="next"' in body
    assert 'class="json small diff-before"' in body
    next_qs = body.split('rel="next" href="/console/audit/?', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    assert "reason 2" in text(op_client.get(f"/console/audit/?{next_qs}"))
    body = text(op_client.get("/console/audit/?actor=alice"))
    assert "reason 0" in body and "reason 1" not in body
    body = text(op_client.get("/console/audit/?action=archive"))
    assert "reason 1" in body and "reason 0" not in body
    body = text(op_client.get("/console/audit/?action=<nuke>&cursor=zzz"))
    assert "filter ignored" in body and "cursor ignored" in body and "reason 0" in body
    assert "<html" not in text(op_client.get("/console/audit/", **HTMX))


# --- tasks --------------------------------------------------------------------


def test_task_list_filters_and_pages(op_client, settings):
    settings.CONSOLE_PAGE_SIZE = 2
    batch = ReportBatch.objects.create(name="b")
    done = make_task(kind="sales_summary", status=TaskStatus.DONE, batch=batch)
    make_task(kind="probe", status=TaskStatus.PENDING)
    make_task(kind="probe", status=TaskStatus.PENDING)
    body = text(op_client.get("/console/tasks/?status=done"))
    assert str(done.public_id)[:8] in body and body.count("badge status-done") == 1
    body = text(op_client.get(f"/console/tasks/?batch={batch.public_id}"))
    assert str(done.public_id)[:8] in body
    body = text(op_client.get("/console/tasks/"))
    assert 'rel="next"' in body
    body = text(op_client.get("/console/tasks/?status=bogus&batch=nope&cursor=x"))
    assert body.count("ignored") == 3
    assert "No tasks match" in text(op_client.get("/console/tasks/?kind=nothing"))
    assert "<html" not in text(op_client.get("/console/tasks/", **HTMX))


def test_task_detail_and_output_download(op_client, media_root):
    task = make_task(
        status=TaskStatus.DONE, attempt=1, output_file="reports/2026/r.csv", finished_at=timezone.now()
    )
    TaskAttempt.objects.create(
        task=task, number=1, started_at=timezone.now(), outcome="succeeded", worker="w pid 9"
    )
    (media_root / "reports" / "2026").mkdir(parents=True)
    (media_root / "reports" / "2026" / "r.csv").write_text("region,total\neu,3\n")
    body = text(op_client.get(f"/console/tasks/{task.public_id}/"))
    assert "w pid 9" in body and f"/console/tasks/{task.public_id}/output" in body
    response = op_client.get(f"/console/tasks/{task.public_id}/output")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b"region,total\neu,3\n"
    assert 'filename="r.csv"' in response["Content-Disposition"]


@pytest.mark.parametrize(
    "output_file", ["../secret.txt", "/etc/passwd", "reports/missing.csv", "", "reports"]
)
def test_task_output_is_path_traversal_safe(op_client, media_root, output_file):
    media_root.mkdir(parents=True, exist_ok=True)
    (media_root / "reports").mkdir(exist_ok=True)
    (media_root.parent / "secret.txt").write_text("secret")
    task = make_task(status=TaskStatus.DONE, output_file=output_file)
    assert op_client.get(f"/console/tasks/{task.public_id}/output").status_code == 404


def test_task_output_of_unfinished_or_unknown_task_is_404(op_client):
    task = make_task(status=TaskStatus.PENDING)
    assert op_client.get(f"/console/tasks/{task.public_id}/output").status_code == 404
    assert op_client.get(f"/console/tasks/{uuid.uuid4()}/output").status_code == 404
    assert op_client.get("/console/tasks/not-a-uuid/").status_code == 404


# --- login --------------------------------------------------------------------


def test_login_page_keeps_next_and_shows_errors(client):
    body = text(client.get("/console/login/?next=/console/dead-letters/%3Fstatus%3Dall"))
    assert 'name="next" value="/console/dead-letters/?status=all"' in body
    get_user_model().objects.create_user("op2", "", "right-password-1", is_staff=True).groups.add(
        operators_group()
    )
    response = client.post(
        "/console/login/", {"username": "op2", "password": "wrong", "next": "/console/audit/"}
    )
    assert response.status_code == 200 and "Wrong username or password" in text(response)
    assert 'name="next" value="/console/audit/"' in text(response)
    response = client.post(
        "/console/login/", {"username": "op2", "password": "right-password-1", "next": "/console/audit/"}
    )
    assert response.status_code == 302 and response["Location"] == "/console/audit/"


def test_login_refuses_open_redirects(client):
    get_user_model().objects.create_user("op3", "", "right-password-1", is_staff=True)
    for target in ["https://evil.example/", "//evil.example/", "/\\evil.example"]:
        client.logout()
        response = client.post(
            "/console/login/", {"username": "op3", "password": "right-password-1", "next": target}
        )
        assert response.status_code == 302
        assert response["Location"] == "/console/", target


# --- filters API (used by the bulk actions) ----------------------------------


def test_filter_round_trip_and_querystring():
    batch = uuid.uuid4()
    filters = parse_dead_letter_filters(
        {
            "status": "all",
            "kind": "probe",
            "fingerprint": "A" * 40,
            "batch": str(batch),
            "q": "x y",
            "sort": "oldest",
        }
    )
    assert filters.fingerprint == "a" * 40
    again = parse_dead_letter_filters(dict(pair.split("=") for pair in filters.querystring().split("&")))
    assert again.kind == "probe" and again.status == "all" and again.sort == "oldest"
    assert parse_dead_letter_filters(filters.as_json()) == filters
    assert parse_dead_letter_filters({}).querystring() == ""
    with pytest.raises(InvalidFilter) as exc:
        parse_dead_letter_filters({"status": "gone"})
    assert exc.value.param == "status"


def test_filtered_dead_letters_matches_the_list():
    a = dead(kind="probe")
    dead(kind="sales_summary")
    dead(kind="probe", status=DeadLetterStatus.REPLAYED)
    qs = filtered_dead_letters(parse_dead_letter_filters({"kind": "probe"}))
    assert list(qs.values_list("id", flat=True)) == [a.id]


def test_ago_filter_keeps_one_unit():
    from console.templatetags.console_format import ago

    now = timezone.now()
    assert ago(now) == "just now"
    assert ago(now - timedelta(minutes=95)) == "1\xa0hour ago"
    assert ago(now - timedelta(days=2, hours=5)) == "2\xa0days ago"
    assert ago(None) == ""


def test_dashboard_aggregates_are_shared_between_polls_for_a_while(op_client, settings):
    settings.CONSOLE_DASHBOARD_CACHE_SECONDS = 60
    make_dead_letter(error_message="first")
    before = op_client.get("/console/", HTTP_HX_REQUEST="true").context["letter_counts"]["open"]
    make_dead_letter(error_message="second")

    cached = op_client.get("/console/", HTTP_HX_REQUEST="true").context["letter_counts"]["open"]
    settings.CONSOLE_DASHBOARD_CACHE_SECONDS = 0
    live = op_client.get("/console/", HTTP_HX_REQUEST="true").context["letter_counts"]["open"]

    assert (before, cached, live) == (1, 1, 2)
