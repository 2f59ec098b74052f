"""The housekeeper's loop: each duty of reports/housekeeper/duties.py runs when it is due, one at
a time, until SIGTERM or Ctrl-C (a duty running then finishes first).

An outage of the database or Redis stops no housekeeper. When a duty fails and a dependency does
not answer, the loop says so once, puts every duty on hold and asks again (config.health's probe,
waiting as config.backoff says between tries) until both answer; then it says so and carries on,
the duty that failed first. Its readiness probe answers 503 meanwhile. A duty that fails while
both answer (a bug, a lock timeout) is logged with its traceback once per streak and tried again
with backoff; the other duties go on.
"""

import json
import logging
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.db import close_old_connections, connections

from config.backoff import backoff_delay, doubling
from config.health import dependencies_down
from config.redis_client import retries_at_most
from reports.housekeeper.duties import Duty, every_duty

logger = logging.getLogger("reports.housekeeper")

OUTAGE_STEPS = doubling(0.5, 5.0)  # between two asks while a dependency is down
FAILURE_STEPS = doubling(1.0, 60.0)  # before a failing duty runs again
STUCK_AFTER_SECONDS = 300  # liveness: the loop has not turned for this long


class Housekeeper:
    def __init__(self, duties: list[Duty] | None = None):
        self.duties = every_duty() if duties is None else duties
        self.due_at = {duty.name: 0.0 for duty in self.duties}  # time.monotonic(); 0: at once
        self.failures = {duty.name: 0 for duty in self.duties}
        self.turned_at = time.monotonic()
        self.stopping = threading.Event()

    def run(self) -> None:
        """Until SIGTERM or SIGINT."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())
        logger.info(
            "housekeeper started: %s", ", ".join(f"{duty.name} every {duty.interval:g} s" for duty in self.duties)
        )
        while not self.stopping.is_set():
            duty = min(self.duties, key=lambda one: self.due_at[one.name])
            if not self.stopping.wait(max(0.0, self.due_at[duty.name] - time.monotonic())):
                self.run_duty(duty)

    def run_once(self) -> list[tuple[Duty, object]]:
        """Every duty once, in order (cron): what each returned, or the exception it raised."""
        done = []
        for duty in self.duties:
            try:
                done.append((duty, duty.run()))
            except Exception as error:  # noqa: BLE001 - the others still run
                logger.error("duty %r failed", duty.name, exc_info=error)
                done.append((duty, error))
        return done

    def run_duty(self, duty: Duty) -> None:
        self.turned_at = time.monotonic()
        try:
            with retries_at_most(0):  # a Redis outage is ridden out below, not inside the duty
                duty.run()
        except Exception as error:  # noqa: BLE001 - whatever a duty raises, the others go on
            self._failed(duty, error)
        else:
            if self.failures[duty.name]:
                logger.warning("duty %r works again after %d failed runs", duty.name, self.failures[duty.name])
            self.failures[duty.name] = 0
            self.due_at[duty.name] = time.monotonic() + duty.interval
        finally:
            close_old_connections()

    def _failed(self, duty: Duty, error: Exception) -> None:
        connections.close_all()  # a broken connection must not serve the next duty
        down = dependencies_down()
        if down and not self.stopping.is_set():
            self._ride_out(down, duty, error)
            return  # the failed duty is due at once: it runs first when the loop carries on
        self.failures[duty.name] += 1
        if self.failures[duty.name] == 1:
            logger.error("duty %r failed; it runs again with backoff", duty.name, exc_info=error)
        wait = max(duty.interval, backoff_delay(self.failures[duty.name], FAILURE_STEPS))
        self.due_at[duty.name] = time.monotonic() + wait

    def _ride_out(self, down: list[str], duty: Duty, error: Exception) -> None:
        started, gone = time.monotonic(), " and ".join(down)
        logger.error(
            "%s unreachable (%s in duty %r): every duty on hold until it answers, asked again with backoff",
            gone, f"{type(error).__name__}: {str(error)[:200]}", duty.name,
        )
        tries = 0
        while down and not self.stopping.is_set():
            tries += 1
            self.stopping.wait(backoff_delay(tries, OUTAGE_STEPS))
            self.turned_at = time.monotonic()
            down = dependencies_down()
        if not down:
            logger.warning("%s reachable again after %.1f s: carrying on", gone, time.monotonic() - started)

    def probe_answer(self, path: str) -> tuple[int, dict]:
        """/healthz: the loop turns (not stuck in a duty); /readyz: the database and Redis answer
        now, so the duties run (asked at each probe, as the web's /readyz does)."""
        if path == "/healthz":
            stuck = time.monotonic() - self.turned_at > STUCK_AFTER_SECONDS
            return (503, {"status": "stuck"}) if stuck else (200, {"status": "ok"})
        if path == "/readyz":
            down = dependencies_down()
            connections.close_all()  # this thread's own; the next probe comes in another thread
            return (503, {"status": "unavailable", "down": down}) if down else (200, {"status": "ready"})
        return 404, {"status": "not found"}


def serve_probes(housekeeper: Housekeeper, host: str, port: int) -> ThreadingHTTPServer:
    """/healthz and /readyz of the housekeeper on host:port, answered from a thread of their own."""

    class Probe(BaseHTTPRequestHandler):
        def do_GET(self):
            status, body = housekeeper.probe_answer(self.path)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):  # a probe every few seconds is not news
            pass

    server = ThreadingHTTPServer((host, port), Probe)
    threading.Thread(target=server.serve_forever, daemon=True, name="probes").start()
    return server
