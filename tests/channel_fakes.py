"""Local servers that behave like each alert channel's service, written from its documentation,
independently of the production code: they check the request format and signature, keep the
documented rate limits and answer the documented errors. Clocks are injectable
(tests/dingtalk_fake.FakeClock).

FakeFeishu   /open-apis/bot/v2/hook/<id>; signed body (timestamp in seconds within an hour, sign =
             base64 HMAC-SHA256 keyed by "timestamp\\nsecret" over nothing); 19021 bad sign, 19024
             keyword missing, 9499 bad request, 11232 over 100/min or 5/s.
FakeWeCom    /cgi-bin/webhook/send?key=<key>; 93000 bad key, 40058 markdown over 4096 bytes,
             44004 empty content, 45009 over 20/min.
FakeSlack    /services/T/B/<secret>; 404 no_service, 400 invalid_blocks / no_text, 429 with
             Retry-After past one message a second.
FakeWebhook  a receiver of our signed webhook: 401 on a bad or stale signature, 429 with
             Retry-After past its limit; de-duplicates by Idempotency-Key as a receiver should.
FakeSMTP     a minimal SMTP server (EHLO, MAIL, RCPT, DATA, QUIT) that keeps what it received.
FakeHeartbeat a dead-man's-switch check as healthchecks.io documents it: GET or POST /ping/<uuid>
             answers 200 "OK", 404 for an unknown uuid.
"""

import base64
import email
import hashlib
import hmac
import json
import socketserver
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


@dataclass
class Hit:
    at: float
    path: str
    headers: dict
    raw: bytes
    body: dict
    status: int = 0
    code: int | None = None

    @property
    def accepted(self) -> bool:
        return self.status == 200 and self.code in (0, None)


class _FakeService:
    """The HTTP plumbing: one ThreadingHTTPServer; subclasses implement check()."""

    limit_per_minute = 0
    limit_per_second = 0

    def __init__(self, *, clock=time.time, mode: str = "ok"):
        self.clock = clock
        self.mode = mode  # ok | 500 | timeout
        self.hits: list[Hit] = []
        self.fail_next: list[tuple[int, dict | str, dict]] = []  # (status, answer, headers)
        self._lock = threading.Lock()
        self._accepted_at: list[float] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                fake._handle(self)

            do_GET = do_POST  # noqa: N815

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def accepted(self) -> list[Hit]:
        with self._lock:
            return [h for h in self.hits if h.accepted]

    def over_limit(self, now: float) -> bool:
        """The documented budget; records an accepted send when within it."""
        with self._lock:
            self._accepted_at = [t for t in self._accepted_at if t > now - 60]
            if self.limit_per_minute and len(self._accepted_at) >= self.limit_per_minute:
                return True
            if self.limit_per_second and sum(t > now - 1 for t in self._accepted_at) >= self.limit_per_second:
                return True
            self._accepted_at.append(now)
            return False

    def _send(self, handler, status: int, answer, headers: dict | None = None) -> None:
        data = (json.dumps(answer) if isinstance(answer, dict) else answer).encode()
        try:
            handler.send_response(status)
            handler.send_header(
                "Content-Type", "application/json" if isinstance(answer, dict) else "text/plain"
            )
            handler.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _handle(self, handler) -> None:
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        hit = Hit(at=self.clock(), path=handler.path, headers=dict(handler.headers), raw=raw, body=body)
        with self._lock:
            self.hits.append(hit)
            forced = self.fail_next.pop(0) if self.fail_next else None
        if self.mode == "500":
            hit.status = 502
            return self._send(handler, 502, "<html>502 Bad Gateway</html>")
        if self.mode == "timeout":
            time.sleep(3)
            return None
        status, answer, headers = forced or self.check(hit)
        hit.status = status
        hit.code = answer.get("code", answer.get("errcode")) if isinstance(answer, dict) else None
        self._send(handler, status, answer, headers)
        return None

    def check(self, hit: Hit) -> tuple[int, dict | str, dict]:
        raise NotImplementedError


class FakeFeishu(_FakeService):
    limit_per_minute, limit_per_second = 100, 5

    def __init__(self, *, hook_id="0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", secret="", keyword="", **kw):
        super().__init__(**kw)
        self.hook_id, self.secret, self.keyword = hook_id, secret, keyword

    @property
    def url(self) -> str:
        return f"{self.base}/open-apis/bot/v2/hook/{self.hook_id}"

    def check(self, hit):
        def answer(code, msg):
            return 200, {"code": code, "msg": msg, "data": {}}, {}

        if urlsplit(hit.path).path != f"/open-apis/bot/v2/hook/{self.hook_id}":
            return answer(19001, "param invalid: incoming webhook access token invalid")
        body = hit.body
        if self.secret:
            timestamp, sign = body.get("timestamp"), body.get("sign")
            if not timestamp or not sign or abs(int(self.clock()) - int(timestamp)) > 3600:
                return answer(19021, "sign match fail or timestamp is not within one hour from current time")
            key = f"{timestamp}\n{self.secret}".encode()
            expected = base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
            if not hmac.compare_digest(sign, expected):
                return answer(19021, "sign match fail or timestamp is not within one hour from current time")
        if body.get("msg_type") not in ("text", "post", "interactive", "share_chat", "image") or not (
            body.get("content") or body.get("card")
        ):
            return answer(9499, "Bad Request")
        if self.keyword and self.keyword not in json.dumps(body, ensure_ascii=False):
            return answer(19024, "Key Words Not Found")
        if self.over_limit(hit.at):
            return answer(11232, "frequency limited psm[lark.oapi.app_platform_runtime]appID[1]")
        return answer(0, "success")

    def post_text(self, hit: Hit) -> str:
        post = hit.body["content"]["post"]["zh_cn"]
        return post["title"] + "\n" + "\n".join(el.get("text", "") for row in post["content"] for el in row)


class FakeWeCom(_FakeService):
    limit_per_minute = 20

    def __init__(self, *, key="693a91f6-7xxx-4bc4-97a0-0ec2sifa5aaa", **kw):
        super().__init__(**kw)
        self.key = key

    @property
    def url(self) -> str:
        return f"{self.base}/cgi-bin/webhook/send?key={self.key}"

    def check(self, hit):
        def answer(code, msg):
            return 200, {"errcode": code, "errmsg": msg}, {}

        parts = urlsplit(hit.path)
        if parts.path != "/cgi-bin/webhook/send" or parse_qs(parts.query).get("key") != [self.key]:
            return answer(93000, "invalid webhook url")
        msgtype = hit.body.get("msgtype")
        content = (hit.body.get(msgtype) or {}).get("content") if msgtype in ("text", "markdown") else None
        if not content:
            return answer(44004, "empty content")
        if msgtype == "markdown" and len(content.encode()) > 4096:
            return answer(40058, "markdown.content exceed max length 4096")
        if self.over_limit(hit.at):
            return answer(45009, "api freq out of limit")
        return answer(0, "ok")


class FakeSlack(_FakeService):
    limit_per_second = 1

    def __init__(self, *, path="/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX", **kw):
        super().__init__(**kw)
        self.path = path

    @property
    def url(self) -> str:
        return f"{self.base}{self.path}"

    def check(self, hit):
        if urlsplit(hit.path).path != self.path:
            return 404, "no_service", {}
        if not hit.body.get("text") and not hit.body.get("blocks"):
            return 400, "no_text", {}
        for block in hit.body.get("blocks") or []:
            if block.get("type") == "header" and len(block["text"]["text"]) > 150:
                return 400, "invalid_blocks", {}
            for element in block.get("elements") or []:
                if element.get("type") == "button" and not element.get("url", "").startswith("http"):
                    return 400, "invalid_blocks", {}
        if self.over_limit(hit.at):
            return 429, "rate_limited", {"Retry-After": "1"}
        return 200, "ok", {}


class FakeWebhook(_FakeService):
    """A receiver written from docs/operators.md's verification recipe."""

    def __init__(self, *, secret="whsec-0123456789abcdef0123456789", limit_per_minute=0, **kw):
        super().__init__(**kw)
        self.secret = secret
        self.limit_per_minute = limit_per_minute
        self.effects: dict[str, dict] = {}  # Idempotency-Key -> body, once each

    @property
    def url(self) -> str:
        return f"{self.base}/hooks/report-alerts"

    def check(self, hit):
        timestamp = hit.headers.get("X-Alert-Timestamp", "")
        signature = hit.headers.get("X-Alert-Signature", "")
        if not timestamp.isdigit() or abs(self.clock() - int(timestamp)) > 300:
            return 401, {"error": "stale or missing timestamp"}, {}
        expected = (
            "v1="
            + hmac.new(self.secret.encode(), timestamp.encode() + b"." + hit.raw, hashlib.sha256).hexdigest()
        )
        if not hmac.compare_digest(signature, expected):
            return 401, {"error": "bad signature"}, {}
        if self.over_limit(hit.at):
            return 429, {"error": "slow down"}, {"Retry-After": "7"}
        with self._lock:
            self.effects.setdefault(hit.headers.get("Idempotency-Key", ""), hit.body)
        return 200, {"ok": True}, {}


class FakeHeartbeat(_FakeService):
    def __init__(self, *, uuid="5bf66975-d4c7-4bf5-bcc8-b8d8a82ab06e", **kw):
        super().__init__(**kw)
        self.uuid = uuid

    @property
    def url(self) -> str:
        return f"{self.base}/ping/{self.uuid}"

    def check(self, hit):
        return (200, "OK", {}) if urlsplit(hit.path).path == f"/ping/{self.uuid}" else (404, "not found", {})


@dataclass
class FakeSMTP:
    """A minimal SMTP server on a free local port; `mails` holds parsed messages."""

    mails: list = field(default_factory=list)
    envelopes: list = field(default_factory=list)

    def __post_init__(self):
        fake = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                def say(line):
                    self.wfile.write(line.encode() + b"\r\n")

                say("220 fake-smtp ready")
                sender, rcpts = "", []
                while True:
                    line = self.rfile.readline().decode(errors="replace").rstrip("\r\n")
                    if not line:
                        return
                    verb = line[:4].upper()
                    if verb in ("EHLO", "HELO"):
                        say("250 fake-smtp")
                    elif verb == "MAIL":
                        sender, rcpts = line.split(":", 1)[1].strip(), []
                        say("250 OK")
                    elif verb == "RCPT":
                        rcpts.append(line.split(":", 1)[1].strip())
                        say("250 OK")
                    elif verb == "DATA":
                        say("354 end with .")
                        data = []
                        while (chunk := self.rfile.readline()) not in (b".\r\n", b""):
                            data.append(chunk[1:] if chunk.startswith(b"..") else chunk)
                        fake.envelopes.append((sender, rcpts))
                        fake.mails.append(email.message_from_bytes(b"".join(data)))
                        say("250 queued")
                    elif verb == "QUIT":
                        say("221 bye")
                        return
                    else:
                        say("250 OK")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
