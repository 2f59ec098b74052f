"""http_export against real HTTP servers on this machine: what it may fetch, and how.

The sources: one that answers JSON, one that redirects, one that streams an endless body, one that
declares a huge one, one that dribbles a byte at a time (the overall deadline), and a TCP port that
answers something that is not HTTP (as Redis's port did)."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from reports.errors import InvalidParams, PermanentError, TransientError, is_retriable
from reports.kinds import KINDS, outbound
from reports.kinds.base import RunContext
from reports.services import FailureInfo

ORDERS = [{"id": 1, "note": '=HYPERLINK("http://x.invalid","y")', "amount": -5}, {"id": 2, "note": "ok"}]
SERVE_AT_MOST = 20.0  # seconds a streaming answer goes on if nobody hangs up


class SourceHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    redirect_to = ""

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.hosts_seen.append(self.headers.get("Host"))
        route = self.path.split("?", 1)[0]
        try:
            getattr(self, "route_" + route.strip("/").replace("-", "_"), self.route_not_found)()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def route_orders(self):
        self._answer(200, json.dumps({"data": {"items": ORDERS}}).encode(),
                     [("Content-Type", "application/json")])

    def route_redirect(self):
        self._answer(302, headers=[("Location", self.server.redirect_to)])

    def route_unavailable(self):
        self._answer(503)

    def route_huge(self):
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        chunk, end = b"[" + b"0," * 32 * 1024, time.monotonic() + SERVE_AT_MOST
        while time.monotonic() < end:
            self.wfile.write(chunk)

    def route_huge_declared(self):
        self.send_response(200)
        self.send_header("Content-Length", str(10**10))
        self.end_headers()
        self.wfile.write(b"[")

    def route_dribble(self):
        self.send_response(200)
        self.send_header("Content-Length", "100000")
        self.end_headers()
        end = time.monotonic() + SERVE_AT_MOST
        while time.monotonic() < end:
            self.wfile.write(b" ")
            self.wfile.flush()
            time.sleep(0.05)

    def route_payload(self):
        self._answer(200, self.server.payload, [("Content-Type", "application/json")])

    def route_not_found(self):
        self._answer(404)


@pytest.fixture
def source():
    server = ThreadingHTTPServer(("127.0.0.1", 0), SourceHandler)
    server.daemon_threads = True
    server.hosts_seen = []
    server.payload = b"[]"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    server.origin = f"http://127.0.0.1:{server.server_port}"
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def not_http_port():
    """A TCP port that accepts and answers in another protocol, as Redis does."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"-ERR wrong number of arguments for 'get' command\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(5)
    listener.close()


def closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return probe.getsockname()[1]


@pytest.fixture
def export(settings, tmp_path, source):
    """Runs http_export as a worker would (validate at submit, generate in the attempt), with the
    source's host:port allowed and a deadline below the per-read timeout (the dribble test shortens
    it; an ordinary fetch on a loaded machine must not meet it)."""
    settings.HTTP_EXPORT_ALLOWED_HOSTS = [f"127.0.0.1:{source.server_port}"]
    settings.HTTP_EXPORT_TIMEOUT = 10.0
    settings.HTTP_EXPORT_DEADLINE = 8.0
    settings.HTTP_EXPORT_MAX_BYTES = 256 * 1024
    kind = KINDS["http_export"]
    ctx = RunContext(task_id=1, public_id="t", attempt=1, output_dir=tmp_path / "out")

    def run(url, **params):
        return kind.generate(kind.validate({"url": url, **params}), ctx)

    run.kind, run.ctx = kind, ctx
    return run


def test_an_allowed_source_is_fetched_and_tabulated_without_formulas(export, source):
    path = export(f"{source.origin}/orders?x=1", records_path="data.items")
    assert path.read_text(encoding="utf-8-sig").splitlines() == ["id,note,amount", "1,\"'=HYPERLINK(\"\"http://x.invalid\"\",\"\"y\"\")\",-5",
                                             "2,ok,"]
    assert source.hosts_seen == [f"127.0.0.1:{source.server_port}"]


def test_a_redirect_is_not_followed(export, source, not_http_port):
    source.redirect_to = f"{source.origin}/orders"
    with pytest.raises(PermanentError, match=r"redirect \(HTTP 302\)"):
        export(f"{source.origin}/redirect", records_path="data.items")
    assert source.hosts_seen == [f"127.0.0.1:{source.server_port}"]  # one request: the redirect's


def test_an_endless_answer_stops_at_the_byte_cap(export, source):
    started = time.monotonic()
    with pytest.raises(PermanentError, match="larger than HTTP_EXPORT_MAX_BYTES"):
        export(f"{source.origin}/huge")
    assert time.monotonic() - started < 1.5


def test_a_declared_huge_answer_is_refused_before_reading_it(export, source):
    with pytest.raises(PermanentError, match="larger than HTTP_EXPORT_MAX_BYTES"):
        export(f"{source.origin}/huge-declared")


def test_a_dribbling_source_is_cut_off_at_the_overall_deadline(export, source, settings):
    settings.HTTP_EXPORT_DEADLINE = 1.5
    started = time.monotonic()
    with pytest.raises(TransientError, match="took longer than HTTP_EXPORT_DEADLINE"):
        export(f"{source.origin}/dribble")
    # Each byte arrives well within the 10 s read timeout; only the 1.5 s deadline ends it (the
    # message says which; the source would dribble on for 20 s). Not before it, at any load.
    elapsed = time.monotonic() - started
    print(f"cut off after {elapsed:.2f} s")
    assert 1.4 < elapsed < SERVE_AT_MOST


def test_a_server_error_is_retried_and_a_missing_page_is_not(export, source):
    with pytest.raises(TransientError, match="HTTP 503") as unavailable:
        export(f"{source.origin}/unavailable")
    with pytest.raises(PermanentError, match="HTTP 404") as missing:
        export(f"{source.origin}/nothing-here")
    assert (is_retriable(unavailable.value), is_retriable(missing.value)) == (True, False)


def recorded_failure(export, url) -> FailureInfo:
    """What the worker records (last_error, the attempt's traceback) when the fetch fails."""
    params = export.kind.validate({"url": url})
    try:
        export.kind.generate(params, export.ctx)
    except Exception as exc:  # noqa: BLE001 - recorded as the worker records it
        return FailureInfo.from_exception(exc)
    raise AssertionError(f"{url} was fetched")


def test_closed_and_non_http_ports_fail_alike_and_say_nothing_of_why(export, settings, not_http_port):
    shut = closed_port()
    settings.HTTP_EXPORT_ALLOWED_HOSTS += [f"127.0.0.1:{shut}", f"127.0.0.1:{not_http_port}"]
    failures = [recorded_failure(export, f"http://127.0.0.1:{port}/secret-path?token=s3cr3t")
                for port in (shut, not_http_port)]
    assert failures[0].message == failures[1].message == "could not get an HTTP answer from the source"
    assert failures[0].error_type == failures[1].error_type
    for failure in failures:
        assert failure.retriable
        for leak in ("refused", "Errno", "ERR", "BadStatusLine", "s3cr3t", str(shut), str(not_http_port)):
            assert leak not in failure.traceback


@pytest.mark.parametrize(
    "url",
    [
        "http://evil.example\\@127.0.0.1:{port}/orders",  # urlsplit reads 127.0.0.1, requests evil.example
        "http://evil.example@127.0.0.1:{port}/orders",
        "http://user:pw@127.0.0.1:{port}/orders",
        "http://127.0.0.1:{port} /orders",
        "http://127.0.0.1:{port}/orders\r\nX-Injected: 1",
        "http://127.0.0.1:{port}/ord\x00ers",
        "http://127.0.0.1:6379/",
        "http://127.0.0.1/orders",
        "http://2130706433:{port}/orders",
        "http://0x7f000001:{port}/orders",
        "http://127.1:{port}/orders",
        "http://[::1]:{port}/orders",
        "http://[::ffff:127.0.0.1]:{port}/orders",
        "http://localhost:{port}/orders",
        "http://169.254.169.254/latest/meta-data/",
        "file:///etc/passwd",
        "gopher://127.0.0.1:{port}/",
        "ftp://127.0.0.1:{port}/",
    ],
)
def test_urls_outside_the_policy_are_refused_at_submit(export, source, url):
    with pytest.raises(InvalidParams) as caught:
        export.kind.validate({"url": url.format(port=source.server_port)})
    assert caught.value.field == "url"
    assert source.hosts_seen == []


def test_a_name_that_resolves_to_loopback_is_refused_unless_its_address_is_allowed(export, settings, source):
    port = source.server_port
    settings.HTTP_EXPORT_ALLOWED_HOSTS = [f"localhost:{port}"]
    with pytest.raises(InvalidParams, match="not public"):
        export(f"http://localhost:{port}/orders")
    settings.HTTP_EXPORT_ALLOWED_HOSTS = [f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"]
    assert export(f"http://localhost:{port}/orders", records_path="data.items").exists()
    assert source.hosts_seen == [f"localhost:{port}"]


def test_a_replay_is_checked_against_todays_allowlist(export, settings, source):
    params = export.kind.validate({"url": f"{source.origin}/orders", "records_path": "data.items"})
    settings.HTTP_EXPORT_ALLOWED_HOSTS = ["reports.example.com"]
    with pytest.raises(InvalidParams, match="not in HTTP_EXPORT_ALLOWED_HOSTS"):
        export.kind.generate(params, export.ctx)
    assert source.hosts_seen == []


def test_the_url_stored_is_the_one_checked(export, source):
    params = export.kind.validate({"url": f"HTTP://127.0.0.1:{source.server_port}/orders?a=1#frag"})
    assert params["url"] == f"http://127.0.0.1:{source.server_port}/orders?a=1"


def test_the_fetch_connects_to_the_address_checked_not_to_a_second_lookup(source):
    """`source.test` resolves nowhere: only the checked answer, handed over, can reach the server
    (a rebinding DNS gets no second question)."""
    port = source.server_port
    checked = outbound.check_url(
        f"http://source.test:{port}/orders",
        allowed_hosts=[f"source.test:{port}", f"127.0.0.1:{port}"],
        resolver=lambda host, port: ["127.0.0.1"],
    )
    body = outbound.fetch(checked, timeout=5, deadline=5, max_bytes=10_000)
    assert json.loads(body)["data"]["items"] == ORDERS
    assert source.hosts_seen == [f"source.test:{port}"]


def test_without_records_path_the_one_list_of_objects_in_the_answer_is_found(export, source):
    """The demo source answers {"data": {"items": [...]}}: the kind's defaults must tabulate it."""
    path = export(f"{source.origin}/orders")
    assert path.read_text(encoding="utf-8-sig").splitlines()[0] == "id,note,amount"
    assert len(path.read_text(encoding="utf-8-sig").splitlines()) == 1 + len(ORDERS)


def test_several_lists_of_objects_ask_for_records_path():
    from reports.kinds.json_records import JsonText, find_records

    def records(value):
        doc = JsonText(json.dumps(value))
        return list(doc.records(find_records(doc, "")))

    assert records([{"a": 1}]) == [{"a": 1}]
    assert records({"meta": {"n": 1}, "data": {"items": [{"a": 1}]}}) == [{"a": 1}]
    with pytest.raises(PermanentError, match="set records_path to one of a, b"):
        records({"a": [{"x": 1}], "b": [{"y": 2}]})


@pytest.mark.parametrize("address", ["::7f00:1", "::ffff:0:7f00:1", "64:ff9b::7f00:1", "64:ff9b:1::7f00:1",
                                     "fec0::1", "5f00::1"])
def test_a_name_rebound_to_a_wrapped_inside_address_before_the_attempt_is_refused(
    export, settings, source, monkeypatch, address
):
    """Public at submit, an IPv6 form of an inside address at the attempt: the fetch never starts."""
    port = source.server_port
    settings.HTTP_EXPORT_ALLOWED_HOSTS = [f"export.test:{port}"]
    monkeypatch.setattr(outbound, "system_resolver", lambda host, port: ["93.184.215.14"])
    params = export.kind.validate({"url": f"http://export.test:{port}/orders"})
    monkeypatch.setattr(outbound, "system_resolver", lambda host, port: [address])
    with pytest.raises(InvalidParams, match="not public"):
        export.kind.generate(params, export.ctx)
    assert source.hosts_seen == []


# --- the default source -------------------------------------------------------------------------

SECRET = "api_key=s3cr3t-export-key"


@pytest.fixture
def default_source(settings, source):
    settings.HTTP_EXPORT_URL = f"{source.origin}/orders?{SECRET}"
    return settings.HTTP_EXPORT_URL


def test_a_task_left_on_the_default_source_keeps_no_copy_of_its_url(export, source, default_source):
    params = export.kind.validate({"records_path": "data.items"})
    assert params == {"format": "csv", "records_path": "data.items"}
    path = export.kind.generate(params, export.ctx)
    assert path.read_text(encoding="utf-8-sig").splitlines()[0] == "id,note,amount"
    assert source.hosts_seen == [f"127.0.0.1:{source.server_port}"]


def test_the_default_source_is_resolved_when_the_report_runs(export, settings, source, default_source):
    params = export.kind.validate({})
    settings.HTTP_EXPORT_URL = f"{source.origin}/payload"
    source.payload = json.dumps([{"moved": 1}]).encode()
    assert export.kind.generate(params, export.ctx).read_text(encoding="utf-8-sig").splitlines() == [
        "moved", "1"]


def test_a_refused_default_source_is_named_but_never_shown(export, settings, source, default_source, caplog):
    params = export.kind.validate({})
    settings.HTTP_EXPORT_ALLOWED_HOSTS = ["reports.example.com"]
    with pytest.raises(InvalidParams) as caught:
        export.kind.generate(params, export.ctx)
    assert "default source (HTTP_EXPORT_URL) is refused" in str(caught.value)
    assert SECRET not in str(caught.value) and str(source.server_port) not in str(caught.value)
    assert "not in HTTP_EXPORT_ALLOWED_HOSTS" in caplog.text and SECRET not in caplog.text
    settings.HTTP_EXPORT_URL = ""
    with pytest.raises(InvalidParams, match="no default source"):
        export.kind.validate({})


def test_the_anonymous_openapi_document_holds_no_configured_url(client, default_source):
    document = client.get("/report/openapi.json")
    assert document.status_code == 200
    assert SECRET not in document.content.decode()
    assert "/orders" not in document.content.decode()


def test_an_api_submit_on_the_default_source_stores_no_url(token_client, export, default_source):
    from reports.models import ReportTask

    response = token_client.post("/report/task/submit", {"kind": "http_export"},
                                 content_type="application/json")
    assert response.status_code == 201, response.content
    assert ReportTask.objects.get().params == {"format": "csv", "records_path": ""}


# --- what a source sends ------------------------------------------------------------------------

FORGED = "\x01\n2026-11-24 12:00:00 INFO reports.worker task 1 done\u202e"


def test_a_cell_xlsx_cannot_hold_is_a_permanent_error_on_one_line(export, source):
    source.payload = json.dumps([{"note": FORGED}]).encode()
    with pytest.raises(PermanentError) as caught:
        export(f"{source.origin}/payload", format="xlsx")
    failure = FailureInfo.from_exception(caught.value)
    assert not failure.retriable
    assert "\n" not in failure.message and "\x01" not in failure.message and "\u202e" not in failure.message
    assert "\\x01\\n2026-11-24" in failure.message


def test_failure_messages_quoting_what_a_source_sent_stay_on_one_line():
    failure = FailureInfo.from_exception(RuntimeError(FORGED))
    assert failure.message.isprintable()
    assert "\\n2026-11-24" in failure.message


def test_several_record_lists_with_hostile_names_are_listed_escaped(export, source):
    source.payload = json.dumps({"a\nFAKE": [{"x": 1}], "b": [{"y": 2}]}).encode()
    with pytest.raises(PermanentError) as caught:
        export(f"{source.origin}/payload")
    assert "a\\nFAKE, b" in str(caught.value)


def test_an_answer_that_is_not_http_is_logged_on_one_line(export, settings, caplog):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def answer():
        conn, _ = listener.accept()
        with conn:
            conn.recv(1024)
            conn.sendall(b"\x01 2026-11-24 INFO forged\x1b[2J\r\n\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    settings.HTTP_EXPORT_ALLOWED_HOSTS = [f"127.0.0.1:{port}"]
    try:
        with pytest.raises(TransientError):
            export(f"http://127.0.0.1:{port}/")
    finally:
        thread.join(5)
        listener.close()
    lines = [record.getMessage() for record in caplog.records if "http_export" in record.getMessage()]
    assert lines and all(line.isprintable() for line in lines), lines


def test_columns_are_collected_in_linear_steps():
    """20,000 distinct keys: one dict step each, where a list's `in` compared each with all before."""
    from reports.kinds.json_records import collect_columns

    comparisons = 0

    class Key(str):
        __hash__ = str.__hash__

        def __eq__(self, other):
            nonlocal comparisons
            comparisons += 1
            return str.__eq__(self, other)

    names = [f"k{n}" for n in range(20_000)]
    records = [{Key(name): 1 for name in names[start : start + 100]} for start in range(0, 20_000, 100)]
    records += [{Key(name): 2 for name in names[:100]}]  # keys seen before: equal, not the same objects
    columns, count = collect_columns(records)
    assert (columns, count) == (names, 201)
    assert comparisons <= 2 * 100 + 20_000, comparisons  # the list version made about 200 million


def test_an_answer_is_streamed_not_loaded_whole(export, source, monkeypatch):
    """json.loads of the whole answer is what cost ~270 MB per 10 MiB; the records are decoded one
    at a time instead."""
    monkeypatch.setattr(json, "loads", None)
    source.payload = json.dumps({"data": {"items": ORDERS * 1000}, "meta": {"lists": [[1], [2]]}}).encode()
    path = export(f"{source.origin}/payload")
    assert len(path.read_text(encoding="utf-8-sig").splitlines()) == 1 + 2000


def test_records_with_too_many_different_keys_are_refused_not_written(export, source):
    """Each record with a key of its own makes a table of rows x columns mostly empty cells: a
    357 KB answer once wrote 125 MB. A table may hold one cell per byte HTTP_EXPORT_MAX_BYTES allows."""
    source.payload = json.dumps([{f"key{n}": n} for n in range(1000)]).encode()  # 1,000,000 cells
    with pytest.raises(PermanentError, match="1000 rows x 1000 columns") as refused:
        export(f"{source.origin}/payload")
    assert not is_retriable(refused.value)
    assert not list((export.ctx.output_dir).glob("*"))

    source.payload = json.dumps([{"id": n, "note": "x" * 20} for n in range(5000)]).encode()  # 10,000 cells
    assert len(export(f"{source.origin}/payload").read_text(encoding="utf-8-sig").splitlines()) == 5001
