"""A local HTTP server that behaves like a DingTalk custom-robot webhook.

Written from DingTalk's documentation, independently of the production client: it checks the
access token, the `timestamp`/`sign` pair (HMAC-SHA256 of "timestamp\\nsecret", base64, URL-encoded)
within a one-hour window, the keyword, and 20 messages a minute per robot (errcode 130101, after
which it mutes the robot for 10 minutes as DingTalk does). Its clock is injectable so a test can
move through minutes without waiting. Modes: "ok", "500", "timeout" (holds the request until
released or the client gives up), "hang" (records the message as delivered, then holds the answer).
"""

import base64
import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

TIMESTAMP_WINDOW_MS = 3600 * 1000


@dataclass
class Received:
    at: float
    query: dict
    body: dict
    errcode: int | None = None  # None: no JSON answer (500, timeout, hang)
    errmsg: str = ""

    @property
    def msg_uuid(self) -> str | None:
        return self.body.get("msgUuid")

    @property
    def card(self) -> dict:
        return self.body.get("actionCard") or self.body.get("markdown") or {}


@dataclass
class FakeDingTalk:
    token: str = "fake-access-token-0123456789abcdef"
    secret: str = ""
    keyword: str = ""
    limit_per_minute: int = 20
    mute_seconds: float = 600
    clock: object = time.time
    mode: str = "ok"
    received: list[Received] = field(default_factory=list)

    def __post_init__(self):
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._accepted_times: list[float] = []
        self._muted_until = 0.0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                fake._handle(self)

            def log_message(self, *args):  # keep test output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # --- lifecycle ----------------------------------------------------------------

    def start(self) -> "FakeDingTalk":
        self.thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def webhook(self) -> str:
        return f"http://127.0.0.1:{self.port}/robot/send?access_token={self.token}"

    def set_mode(self, mode: str) -> None:
        assert mode in ("ok", "500", "timeout", "hang")
        with self._lock:
            self.mode = mode
            if mode == "ok":
                self._release.set()
            else:
                self._release = threading.Event()

    def release(self) -> None:
        self._release.set()

    # --- what the tests look at ---------------------------------------------------

    @property
    def accepted(self) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.errcode == 0]

    def answers(self) -> list[int | None]:
        with self._lock:
            return [r.errcode for r in self.received]

    def uuid_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        with self._lock:
            for r in self.received:
                counts[r.msg_uuid] = counts.get(r.msg_uuid, 0) + 1
        return counts

    # --- the robot ----------------------------------------------------------------

    def _answer(self, handler, status: int, payload: dict | None, raw: bytes = b"") -> None:
        data = json.dumps(payload).encode() if payload is not None else raw
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json" if payload is not None else "text/html")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout) or was killed

    def _handle(self, handler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length)
        query = {k: v[0] for k, v in parse_qs(urlsplit(handler.path).query).items()}
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        now = self.clock()
        record = Received(at=now, query=query, body=body)
        with self._lock:
            self.received.append(record)
            mode, release = self.mode, self._release
        if mode == "500":
            self._answer(handler, 500, None, b"<html>502 Bad Gateway</html>")
            return
        if mode == "timeout":
            release.wait(60)
            return
        errcode, errmsg = self._check(query, body, now)
        record.errcode, record.errmsg = errcode, errmsg
        if mode == "hang":
            release.wait(60)
        self._answer(handler, 200, {"errcode": errcode, "errmsg": errmsg})

    def _check(self, query: dict, body: dict, now: float) -> tuple[int, str]:
        if query.get("access_token") != self.token:
            return 300001, "token is not exist"
        if self.secret:
            timestamp, signature = query.get("timestamp"), query.get("sign")
            if not timestamp or not signature:
                return 310000, "sign not match, more: missing timestamp or sign"
            if abs(int(now * 1000) - int(timestamp)) > TIMESTAMP_WINDOW_MS:
                return 310000, "sign not match, more: timestamp is invalid"
            expected = base64.b64encode(
                hmac.new(
                    self.secret.encode(), f"{timestamp}\n{self.secret}".encode(), hashlib.sha256
                ).digest()
            ).decode()
            if not hmac.compare_digest(signature, expected):
                return 310000, "sign not match"
        msgtype = body.get("msgtype")
        content = body.get(msgtype) if isinstance(body.get(msgtype), dict) else None
        if content is None:
            return 40035, "缺少参数 json"
        if self.keyword:
            text = json.dumps(content, ensure_ascii=False)
            if self.keyword not in text:
                return 310000, "keywords not in content"
        with self._lock:
            if now < self._muted_until:
                return 130101, "send too fast, exceed 20 times per minute"
            self._accepted_times = [t for t in self._accepted_times if t > now - 60]
            if len(self._accepted_times) >= self.limit_per_minute:
                self._muted_until = now + self.mute_seconds
                return 130101, "send too fast, exceed 20 times per minute"
            self._accepted_times.append(now)
        return 0, "ok"


class FakeClock:
    """Seconds since the epoch that a test moves forward by hand (starts at the real time)."""

    def __init__(self, start: float | None = None):
        self.now = time.time() if start is None else start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds
