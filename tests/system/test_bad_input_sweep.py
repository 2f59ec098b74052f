"""Bad input sweep: malformed bodies to every JSON API endpoint that writes and every console form.

Each request must get a 4xx and leave every row as it was (nothing written, nothing changed).
Hypothesis generates wrong types, unknown fields, out-of-range numbers and odd JSON shapes; the
explicit cases cover invalid UTF-8, 1 MB strings, 10,000-deep nesting, negative and 10**30
numbers, NaN, and the wrong Content-Type. The outbound URL forms an SSRF tries (backslash, userinfo,
IPv6, decimal/octal/short IPs, a name resolving to 127.0.0.1, other ports, the metadata address,
file://) are refused at submit, in batches and in edited replays; a redirect, seen only when an
allowed source answers, ends the attempt without a second request.
"""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deadletters.models import Alert, AuditEntry, BulkAction, DeadLetter
from reports.kinds import KINDS
from reports.models import PausedKind, Priority, ReportBatch, ReportTask, TaskAttempt
from reports.worker.report_job import HandedOver, run_kind
from tests.conftest import make_death

pytestmark = pytest.mark.django_db

SWEEP = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
PROBE_FIELDS = {"sleep_seconds", "fail_attempts", "fail_permanently", "write_output"}
MB = 1024 * 1024
DEEP = "[" * 10_000 + "]" * 10_000


def snapshot() -> dict:
    """Every row a bad request could write or change, with the fields that would change."""
    return {
        "tasks": list(ReportTask.objects.order_by("pk").values_list("pk", "status", "attempt", "max_attempts",
                                                                   "params", "updated_at")),
        "attempts": TaskAttempt.objects.count(),
        "letters": list(DeadLetter.objects.order_by("pk").values_list("pk", "status", "replayed_at",
                                                                     "archived_at", "discarded_at")),
        "batches": ReportBatch.objects.count(),
        "bulks": BulkAction.objects.count(),
        "audit": AuditEntry.objects.count(),
        "alerts": Alert.objects.count(),
        "paused": PausedKind.objects.count(),
    }


def assert_rejected(response, before: dict, what) -> None:
    assert snapshot() == before, f"{what!r:.300} changed rows (status {response.status_code})"
    assert 400 <= response.status_code < 500, (
        f"{what!r:.300} got {response.status_code}, not a 4xx: {response.content[:300]!r}"
    )


# --- strategies ------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=16,
)
not_a_dict = json_values.filter(lambda v: not isinstance(v, dict))
not_a_bool = json_values.filter(lambda v: not isinstance(v, bool))
bad_sleep = st.one_of(
    st.integers(max_value=-1),
    st.integers(min_value=601),  # a canary sleeps at most ten minutes
    st.floats(max_value=-1e-9, allow_infinity=False, allow_nan=False),
    st.floats(min_value=600.001, allow_infinity=False, allow_nan=False),
    json_values.filter(lambda v: isinstance(v, bool) or not isinstance(v, int | float)),
)
bad_fail_attempts = st.one_of(
    st.integers(max_value=-1),
    st.integers(min_value=1001),
    # JSON Schema counts 2.0 as an integer, and so does the kind: only non-integral or out-of-range floats.
    st.floats(allow_nan=False, allow_infinity=False)
    .filter(lambda f: not (f.is_integer() and 0 <= f <= 1000)),
    json_values.filter(lambda v: isinstance(v, bool) or not isinstance(v, int)),
)
unknown_key = st.text(min_size=1, max_size=20).filter(lambda k: k not in PROBE_FIELDS)
bad_probe_params = st.one_of(
    st.fixed_dictionaries({"sleep_seconds": bad_sleep}),
    st.fixed_dictionaries({"fail_attempts": bad_fail_attempts}),
    st.fixed_dictionaries({"fail_permanently": not_a_bool}),
    st.fixed_dictionaries({"write_output": not_a_bool}),
    st.dictionaries(unknown_key, json_values, min_size=1, max_size=3),
    not_a_dict.filter(lambda v: v is not None),
)
bad_kind = st.one_of(json_values.filter(lambda v: not isinstance(v, str)),
                     st.text().filter(lambda s: s not in KINDS))
bad_priority = json_values.filter(lambda v: v not in (None, "") and v not in Priority.values)
bad_key = st.one_of(
    json_values.filter(lambda v: v not in (None, "") and not isinstance(v, str)),
    st.text(min_size=201, max_size=300),
    st.text(min_size=1, max_size=20).map(lambda s: s + "\x00"),
)
bad_submit = st.one_of(
    not_a_dict,
    st.fixed_dictionaries({"kind": bad_kind}),
    st.fixed_dictionaries({"kind": st.just("probe"), "params": bad_probe_params}),
    st.fixed_dictionaries({"kind": st.just("probe"), "priority": bad_priority}),
    st.fixed_dictionaries({"kind": st.just("probe"), "idempotency_key": bad_key}),
    st.dictionaries(st.text(min_size=1, max_size=20).filter(lambda k: k not in {"kind", "params", "priority",
                                                                                 "idempotency_key"}),
                    json_values, min_size=1, max_size=3).map(lambda d: {"kind": "probe", **d}),
)
good_item = st.just({"kind": "probe", "params": {}})
bad_item = st.one_of(
    not_a_dict,
    st.fixed_dictionaries({"kind": bad_kind}),
    st.fixed_dictionaries({"kind": st.just("probe"), "params": bad_probe_params}),
    st.fixed_dictionaries({"kind": st.just("probe"), "priority": bad_priority}),
    st.fixed_dictionaries({"kind": st.just("probe"), "extra": json_values}),
)
bad_batch = st.one_of(
    not_a_dict,
    st.fixed_dictionaries({"items": json_values.filter(lambda v: not isinstance(v, list) or not v)}),
    # One bad item among good ones: the whole batch is refused, no task of it is written.
    st.tuples(st.lists(good_item, max_size=5), bad_item, st.lists(good_item, max_size=5)).map(
        lambda t: {"items": [*t[0], t[1], *t[2]]}
    ),
    st.fixed_dictionaries({"items": st.just([{"kind": "probe"}]), "priority": bad_priority}),
    st.fixed_dictionaries({"items": st.just([{"kind": "probe"}]), "unknown": json_values}),
)
bad_reason_body = st.one_of(
    not_a_dict,
    st.fixed_dictionaries({"reason": json_values.filter(lambda v: not isinstance(v, str))}),
    st.fixed_dictionaries({"reason": st.text(min_size=2001, max_size=2100)}),
    st.dictionaries(st.text(min_size=1, max_size=20).filter(lambda k: k != "reason"), json_values, min_size=1,
                    max_size=3),
)

# Raw bodies every JSON endpoint must refuse, whatever its fields.
RAW_CASES = [
    ("invalid UTF-8", b'{"kind": "probe", "params": {"x": "\xff\xfe\xfd"}}', "application/json"),
    ("lone surrogate bytes", b'{"kind": "\xed\xa0\x80"}', "application/json"),
    ("1 MB string", json.dumps({"kind": "probe", "params": {"x": "a" * MB}}).encode(), "application/json"),
    ("1 MB key", json.dumps({"k" * MB: 1}).encode(), "application/json"),
    ("10,000-deep list", ('{"kind": "probe", "params": {"x": ' + DEEP + "}}").encode(), "application/json"),
    ("10,000-deep objects", ('{"a":' * 10_000 + "1" + "}" * 10_000).encode(), "application/json"),
    ("NaN", b'{"kind": "probe", "params": {"sleep_seconds": NaN}}', "application/json"),
    ("Infinity", b'{"kind": "probe", "params": {"sleep_seconds": Infinity}}', "application/json"),
    ("truncated JSON", b'{"kind": "probe", "params": {', "application/json"),
    ("JSON array", b'[{"kind": "probe"}]', "application/json"),
    ("form body", b"kind=probe&params=%7B%7D", "application/x-www-form-urlencoded"),
    ("text/plain", b'{"kind": "probe"}', "text/plain"),
    ("latin-1 charset", b'{"kind": "probe"}', "application/json; charset=latin-1"),
]
NUMBER_CASES = [
    {"kind": "probe", "params": {"sleep_seconds": -1}},
    {"kind": "probe", "params": {"sleep_seconds": 601}},
    {"kind": "probe", "params": {"sleep_seconds": 3600}},
    {"kind": "probe", "params": {"sleep_seconds": 10**30}},
    {"kind": "probe", "params": {"sleep_seconds": -(10**30)}},
    {"kind": "probe", "params": {"fail_attempts": -5}},
    {"kind": "probe", "params": {"fail_attempts": 10**30}},
    {"kind": "probe", "params": {"fail_attempts": 1e308}},
    {"kind": "probe", "params": {"bogus": 1}},
    {"kind": "probe", "bogus": 1},
]


# --- JSON API ---------------------------------------------------------------------------


def post_json(client, url, body, content_type="application/json"):
    data = body if isinstance(body, bytes) else json.dumps(body)
    return client.generic("POST", url, data, content_type=content_type)


@pytest.fixture
def dead_task(db):
    return make_death().task


def api_posts(dead_task):
    return {
        "submit": "/report/task/submit",
        "batch": "/report/batch/submit",
        "replay": f"/report/task/{dead_task.public_id}/replay",
    }


@SWEEP
@given(body=bad_submit)
def test_submit_refuses_generated_bad_bodies(token_client, body):
    before = snapshot()
    assert_rejected(post_json(token_client, "/report/task/submit", body), before, body)


@SWEEP
@given(body=bad_batch)
def test_batch_submit_refuses_generated_bad_bodies(token_client, body):
    before = snapshot()
    assert_rejected(post_json(token_client, "/report/batch/submit", body), before, body)


@SWEEP
@given(body=bad_reason_body)
def test_replay_refuses_generated_bad_bodies(token_client, dead_task, body):
    before = snapshot()
    url = f"/report/task/{dead_task.public_id}/replay"
    assert_rejected(post_json(token_client, url, body), before, body)


@pytest.mark.parametrize("endpoint", ["submit", "batch", "replay"])
@pytest.mark.parametrize("label,raw,content_type", RAW_CASES, ids=[c[0] for c in RAW_CASES])
def test_every_api_post_refuses_raw_bad_bodies(token_client, dead_task, endpoint, label, raw, content_type):
    before = snapshot()
    response = post_json(token_client, api_posts(dead_task)[endpoint], raw, content_type)
    assert_rejected(response, before, f"{endpoint}: {label}")


@pytest.mark.parametrize("body", NUMBER_CASES, ids=lambda b: json.dumps(b)[:60])
def test_submit_and_batch_refuse_bad_numbers_and_unknown_fields(token_client, body):
    before = snapshot()
    assert_rejected(post_json(token_client, "/report/task/submit", body), before, body)
    batch = {"items": [{"kind": "probe"}, {k: v for k, v in body.items()}]}
    assert_rejected(post_json(token_client, "/report/batch/submit", batch), before, batch)


@pytest.mark.parametrize(
    "url",
    [
        "/report/task/not-a-task/replay",
        "/report/task/00000000-0000-0000-0000-000000000000/replay",
        "/report/task/" + "9" * 40 + "/replay",
        "/report/task/-1/replay",
    ],
)
def test_replay_of_unknown_task_ids_is_refused(token_client, url):
    before = snapshot()
    assert_rejected(post_json(token_client, url, {"reason": "x"}), before, url)


@pytest.mark.parametrize(
    "query",
    [
        "limit=-1", "limit=0", f"limit={10**30}", "limit=abc", "limit=1.5", "limit=1&limit=2",
        "cursor=%FF%FE", "cursor=" + "A" * 5000, "cursor=-1", "fingerprint=xyz", "fingerprint=" + "a" * 41,
        "kind=", "kind=" + "k" * 65, "bogus=1", "status=gone",
    ],
)
def test_dead_letter_list_refuses_bad_queries(token_client, dead_task, query):
    before = snapshot()
    assert_rejected(token_client.get(f"/report/task/dead-letters?{query}"), before, query)


@pytest.mark.parametrize(
    "url", ["/report/task/nope/status", "/report/task/" + "x" * 5000 + "/status", "/report/batch/nope/status"]
)
def test_status_of_malformed_ids_is_refused(token_client, url):
    before = snapshot()
    assert_rejected(token_client.get(url), before, url)


# --- console forms ----------------------------------------------------------------------


@pytest.fixture
def admin_client(db, django_user_model):
    """A superuser, so no refusal below is a permission refusal in disguise."""
    user = django_user_model.objects.create_superuser("sweep-admin", "admin@example.invalid", "sweep-pass-1")
    client = Client(enforce_csrf_checks=False)
    client.force_login(user)
    return client


def post_form(client, url, data: dict | bytes):
    if isinstance(data, bytes):
        return client.generic("POST", url, data, content_type="application/x-www-form-urlencoded")
    return client.post(url, data)


bad_params_text = st.one_of(
    st.text(max_size=60).filter(lambda s: not _is_json_object(s)),
    json_values.filter(lambda v: not isinstance(v, dict)).map(json.dumps),
    bad_probe_params.filter(lambda v: isinstance(v, dict)).map(json.dumps),
)


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


@SWEEP
@given(params=bad_params_text)
def test_console_replay_with_edited_params_refuses_bad_params(admin_client, dead_task, params):
    letter = dead_task.dead_letters.get()
    before = snapshot()
    response = post_form(admin_client, f"/console/dead-letters/{letter.pk}/replay/edit/", {"params": params})
    assert_rejected(response, before, params)


CONSOLE_RAW = [
    ("1 MB params", {"params": "{" + '"x": "' + "a" * MB + '"}'}),
    ("10,000-deep params", {"params": '{"x": ' + DEEP + "}"}),
    ("negative number", {"params": '{"sleep_seconds": -1}'}),
    ("enormous number", {"params": json.dumps({"fail_attempts": 10**30})}),
    ("unknown field", {"params": '{"bogus": true}'}),
    ("invalid UTF-8", b"params=%7B%22x%22%3A%20%22\xff\xfe%22%7D%7D"),
    ("reason over the limit", {"params": "{}", "reason": "r" * 2001}),
]


@pytest.mark.parametrize("label,data", CONSOLE_RAW, ids=[c[0] for c in CONSOLE_RAW])
def test_console_replay_edit_refuses_raw_bad_input(admin_client, dead_task, label, data):
    letter = dead_task.dead_letters.get()
    before = snapshot()
    response = post_form(admin_client, f"/console/dead-letters/{letter.pk}/replay/edit/", data)
    assert_rejected(response, before, label)


@pytest.mark.parametrize(
    "params",
    [{"records_path": "data\u0000items"}, {"records_path": "data", "\u0000": 1}],
    ids=["NUL in a value", "NUL in a key"],
)
def test_console_replay_edit_refuses_nul_as_the_api_does(admin_client, token_client, params):
    """One check for both faces: the edited replay refuses what the API's submit refuses."""
    letter = make_death(kind="http_export")
    before = snapshot()
    edit = {"params": json.dumps(params)}
    response = post_form(admin_client, f"/console/dead-letters/{letter.pk}/replay/edit/", edit)
    assert_rejected(response, before, "edited replay with NUL")
    assert "NUL" in response.content.decode()
    api = post_json(token_client, "/report/task/submit", {"kind": "http_export", "params": params})
    assert_rejected(api, before, "submit with NUL")


@pytest.mark.parametrize("action", ["replay", "archive", "discard"])
@pytest.mark.parametrize("reason", ["r" * 2001, "r" * MB], ids=["2001 chars", "1 MB"])
def test_console_letter_actions_refuse_over_long_reasons(admin_client, dead_task, action, reason):
    letter = dead_task.dead_letters.get()
    before = snapshot()
    response = post_form(admin_client, f"/console/dead-letters/{letter.pk}/{action}/", {"reason": reason})
    assert_rejected(response, before, f"{action} with a {len(reason)}-character reason")


@pytest.mark.parametrize("action", ["replay", "archive", "discard", "restore", "replay/edit"])
@pytest.mark.parametrize("letter_id", ["0", "99999999", "9" * 30])
def test_console_actions_on_unknown_letters_are_refused(admin_client, action, letter_id):
    before = snapshot()
    response = post_form(admin_client, f"/console/dead-letters/{letter_id}/{action}/", {"params": "{}"})
    assert_rejected(response, before, f"{action} {letter_id}")


BULK_SELECTION_CASES = [
    ("unknown action", {"action": "explode", "scope": "selected", "ids": ["1"]}),
    ("unknown scope", {"action": "archive", "scope": "everything", "ids": ["1"]}),
    ("ids not numbers", {"action": "archive", "scope": "selected", "ids": ["abc", "1; DROP TABLE"]}),
    ("negative id", {"action": "archive", "scope": "selected", "ids": ["-1"]}),
    ("enormous id", {"action": "archive", "scope": "selected", "ids": [str(10**30)]}),
    ("no ids", {"action": "archive", "scope": "selected"}),
    ("bad max_id", {"action": "archive", "scope": "filter", "max_id": "x"}),
]
# The preview is a dry run that shows these in its confirmation form; start must refuse them.
BULK_START_CASES = [
    ("negative rate", {"action": "archive", "scope": "selected", "ids": ["LETTER"], "rate_per_second": "-5"}),
    ("enormous rate",
     {"action": "archive", "scope": "selected", "ids": ["LETTER"], "rate_per_second": "1e30"}),
    ("rate not a number",
     {"action": "archive", "scope": "selected", "ids": ["LETTER"], "rate_per_second": "fast"}),
    ("NaN rate", {"action": "archive", "scope": "selected", "ids": ["LETTER"], "rate_per_second": "nan"}),
    ("negative threshold",
     {"action": "replay", "scope": "selected", "ids": ["LETTER"], "pause_threshold": "-1"}),
    ("threshold over 1",
     {"action": "replay", "scope": "selected", "ids": ["LETTER"], "pause_threshold": "10"}),
    ("1 MB reason", {"action": "archive", "scope": "selected", "ids": ["LETTER"], "reason": "r" * MB}),
]
BULK_CASES = [
    (step, label, data) for step in ("preview", "start") for label, data in BULK_SELECTION_CASES
] + [("start", label, data) for label, data in BULK_START_CASES]


@pytest.mark.parametrize("step,label,data", BULK_CASES, ids=[f"{c[0]}: {c[1]}" for c in BULK_CASES])
def test_console_bulk_forms_refuse_bad_input(admin_client, dead_task, step, label, data):
    letter = dead_task.dead_letters.get()
    data = {k: ([str(letter.pk) if i == "LETTER" else i for i in v] if isinstance(v, list) else v)
            for k, v in data.items()}
    before = snapshot()
    assert_rejected(post_form(admin_client, f"/console/bulk/{step}/", data), before, f"{step}: {label}")


@pytest.mark.parametrize(
    "url,data",
    [
        ("/console/kinds/no-such-kind/pause/", {"reason": "x"}),
        ("/console/kinds/" + "k" * 300 + "/pause/", {"reason": "x"}),
        ("/console/kinds/probe/pause/", {"reason": "r" * 2001}),
        ("/console/kinds/no-such-kind/resume/", {}),
    ],
    ids=["unknown kind", "300-char kind", "over-long reason", "resume unknown kind"],
)
def test_console_kind_forms_refuse_bad_input(admin_client, url, data):
    before = snapshot()
    assert_rejected(post_form(admin_client, url, data), before, url[:80])


# --- outbound URLs (http_export, SSRF) -----------------------------------------------------------

SOURCE_PORT = 18080  # the one allowed source; nothing needs to listen there: these never get a request
NAME_PORT = 18081  # allowed for the name localhost, not for its address
SSRF_URLS = [
    ("backslash", "http://evil.example\\@127.0.0.1:{port}/"),
    ("userinfo", "http://evil.example@127.0.0.1:{port}/"),
    ("userinfo with password", "http://u:p@127.0.0.1:{port}/"),
    ("host after userinfo", "http://127.0.0.1:{port}@evil.example/"),
    ("IPv6 loopback", "http://[::1]:{port}/"),
    ("IPv4-mapped IPv6", "http://[::ffff:127.0.0.1]:{port}/"),
    ("decimal IP", "http://2130706433:{port}/"),
    ("octal IP", "http://0177.0.0.1:{port}/"),
    ("hex IP", "http://0x7f.0.0.1:{port}/"),
    ("short IP", "http://127.1:{port}/"),
    ("name resolving to 127.0.0.1", "http://localhost:{name_port}/"),
    ("other port (Redis)", "http://127.0.0.1:6379/"),
    ("other port (ssh)", "http://127.0.0.1:22/"),
    ("default port", "http://127.0.0.1/"),
    ("metadata address", "http://169.254.169.254/latest/meta-data/"),
    ("file", "file:///etc/passwd"),
    ("gopher", "gopher://127.0.0.1:{port}/_INFO"),
    ("space", "http://127.0.0.1:{port}/a b"),
    ("CRLF", "http://127.0.0.1:{port}/\r\nHost: evil.example"),
    ("tab in host", "http://127.0.0.1\t:{port}/"),
    ("non-ASCII", "http://127.0.0.1:{port}/ü"),
    ("empty", ""),
]


@pytest.fixture
def one_allowed_source(settings):
    # localhost is allowed by name, but it resolves to loopback, which only a listed address may be.
    settings.HTTP_EXPORT_ALLOWED_HOSTS = [f"127.0.0.1:{SOURCE_PORT}", f"localhost:{NAME_PORT}"]


@pytest.mark.parametrize("label,url", SSRF_URLS, ids=[c[0] for c in SSRF_URLS])
def test_submit_batch_and_edited_replay_refuse_urls_outside_the_outbound_policy(
    token_client, admin_client, one_allowed_source, label, url
):
    url = url.format(port=SOURCE_PORT, name_port=NAME_PORT)
    letter = make_death(kind="http_export")
    body = {"kind": "http_export", "params": {"url": url}}
    before = snapshot()
    assert_rejected(post_json(token_client, "/report/task/submit", body), before, f"submit: {label}")
    batch = {"items": [{"kind": "probe"}, body]}
    assert_rejected(post_json(token_client, "/report/batch/submit", batch), before, f"batch: {label}")
    edit = {"params": json.dumps({"url": url})}
    response = post_form(admin_client, f"/console/dead-letters/{letter.pk}/replay/edit/", edit)
    assert_rejected(response, before, f"edited replay: {label}")


def test_an_allowed_source_that_redirects_gets_no_second_request(token_client, settings, not_http_listener):
    """A redirect is only seen when the source answers: the attempt dies without following it."""
    redirector = _redirector(f"http://127.0.0.1:{not_http_listener.port}/")
    try:
        settings.HTTP_EXPORT_ALLOWED_HOSTS = [f"127.0.0.1:{redirector.server_port}"]
        url = f"http://127.0.0.1:{redirector.server_port}/"
        response = post_json(token_client, "/report/task/submit",
                             {"kind": "http_export", "params": {"url": url}})
        assert response.status_code == 201
        task = ReportTask.objects.get(public_id=response.json()["task_id"])
        task.attempt = 1
        result = run_kind(HandedOver.of(task))
    finally:
        redirector.shutdown()
        redirector.server_close()
    assert (result.status, result.failure.retriable) == ("failed", False)
    assert "redirect (HTTP 302)" in result.failure.message
    assert not_http_listener.connections == 0


class Redirector(BaseHTTPRequestHandler):
    location = ""

    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", self.location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def _redirector(location: str) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("To", (Redirector,), {"location": location}))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


class CountingListener:
    """A listening port that counts who connects (the redirect's target)."""

    def __init__(self):
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.settimeout(0.1)
        self.port = self.socket.getsockname()[1]
        self.connections = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.socket.accept()
            except OSError:  # the accept timeout included
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self.stopped.set()
        self.thread.join(5)
        self.socket.close()


@pytest.fixture
def not_http_listener():
    listener = CountingListener()
    yield listener
    listener.close()


# IPv6 forms of inside addresses that ipaddress's is_global calls public: an allowed name whose DNS
# answer is one of them must not open a way inside.
WRAPPED_INSIDE = [
    ("IPv4-compatible loopback", "::7f00:2"),
    ("IPv4-translated loopback", "::ffff:0:7f00:2"),
    ("NAT64 loopback", "64:ff9b::7f00:1"),
    ("local-use NAT64", "64:ff9b:1::7f00:2"),
    ("site-local", "fec0::1"),
    ("SRv6 segment id", "5f00::1"),
]


@pytest.mark.parametrize("label,address", WRAPPED_INSIDE, ids=[c[0] for c in WRAPPED_INSIDE])
def test_an_allowed_name_resolving_to_a_wrapped_inside_address_is_refused(
    token_client, admin_client, settings, monkeypatch, label, address
):
    from reports.kinds import outbound

    monkeypatch.setattr(outbound, "system_resolver", lambda host, port: [address])
    settings.HTTP_EXPORT_ALLOWED_HOSTS = [f"export.test:{SOURCE_PORT}"]
    url = f"http://export.test:{SOURCE_PORT}/orders"
    letter = make_death(kind="http_export")
    body = {"kind": "http_export", "params": {"url": url}}
    before = snapshot()
    assert_rejected(post_json(token_client, "/report/task/submit", body), before, f"submit: {label}")
    batch = {"items": [{"kind": "probe"}, body]}
    assert_rejected(post_json(token_client, "/report/batch/submit", batch), before, f"batch: {label}")
    edit = {"params": json.dumps({"url": url})}
    response = post_form(admin_client, f"/console/dead-letters/{letter.pk}/replay/edit/", edit)
    assert_rejected(response, before, f"edited replay: {label}")
