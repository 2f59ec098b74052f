"""A local HTTP server standing in for a kind's upstream (http_export's default source), whose
outage a test switches on and off. Modes: "up" (200, a JSON list of one record), "down" (503),
"hold" (each request waits until release(), then is answered as the mode then says), "hang" (never
answered while the server lives)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeUpstream:
    def __init__(self):
        self.mode = "up"
        self.requests = 0
        self.held = 0
        self._release = threading.Event()
        self._stopped = threading.Event()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802 (http.server's naming)
                upstream.requests += 1
                try:
                    upstream.answer(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    def answer(self, handler) -> None:
        if self.mode == "hang":
            self._stopped.wait()
            return
        if self.mode == "hold":
            self.held += 1
            self._release.wait()
        body = json.dumps([{"n": 1}]).encode() if self.mode == "up" else b""
        handler.send_response(200 if self.mode == "up" else 503)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def release(self, *, then: str) -> None:
        """Answer the held requests (and the next ones) as `then` says."""
        self.mode = then
        self._release.set()

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.server.server_port}"

    @property
    def url(self) -> str:
        return f"http://{self.host_port}/records"

    def start(self) -> "FakeUpstream":
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._release.set()
        self.server.shutdown()
        self.server.server_close()
