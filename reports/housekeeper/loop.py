"""The housekeeper's loop: each duty of reports/housekeeper/duties.py in a thread of its own (as
each Oban plugin is a process of its own), run, then again after its interval, until SIGTERM or
Ctrl-C (a duty running then finishes first). A slow duty (the alert sender waiting on a robot's
answer, a long scan for lost jobs) holds up no other: a scheduled run still starts on time.

An outage of the database or Redis stops no housekeeper. When a duty fails and a dependency does
not answer, the first to notice says so once, puts every duty on hold and asks again
(config.health's probe, waiting as config.backoff says between tries) until both answer; then it
says so and every duty carries on, those that failed at once. Its readiness probe
(`report-probe ready`, config/probe.py) fails meanwhile while its liveness holds. A duty that fails
while both answer (a bug, a lock timeout) is logged with its traceback once per streak and tried
again with backoff; the others go on.

Each duty's thread holds its own database connection (closed after each run unless
DB_CONN_MAX_AGE keeps it).
"""

import logging
import signal
import threading
import time

from django.db import close_old_connections, connections

from config.backoff import backoff_delay, doubling
from config.health import dependencies_down
from config.probe import beat
from config.redis_client import retries_at_most
from reports.housekeeper.duties import Duty, every_duty

logger = logging.getLogger("reports.housekeeper")

OUTAGE_STEPS = doubling(0.5, 5.0)  # between two asks while a dependency is down
FAILURE_STEPS = doubling(1.0, 60.0)  # before a failing duty runs again
STUCK_AFTER_SECONDS = 300  # liveness: a duty has been in one run for this long


class Housekeeper:
    def __init__(self, duties: list[Duty] | None = None):
        self.duties = every_duty() if duties is None else duties
        self.stopping = threading.Event()
        self.answering = threading.Event()  # cleared while an outage is ridden out: every duty holds
        self.answering.set()
        self.outage = threading.Lock()  # one thread rides an outage out, the others wait for it
        self.outages = 0  # ridden out so far: a duty that failed before the last one ended runs again
        self.running: dict[str, float] = {}  # duty name -> when its current run started

    def run(self) -> None:
        """Until SIGTERM or SIGINT."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())
        every = ", ".join(f"{duty.name} every {duty.interval:g} s" for duty in self.duties)
        logger.info("housekeeper started: %s", every)
        threads = [threading.Thread(target=self.keep, args=(duty,), name=duty.name) for duty in self.duties]
        for thread in threads:
            thread.start()
        self.beat()
        while not self.stopping.wait(1):
            self.beat()
        for thread in threads:
            thread.join()

    def beat(self) -> None:
        """The probes' beat (config/probe.py): live while no duty is stuck in one run, ready while
        no outage is being ridden out."""
        now = time.monotonic()
        if all(now - since <= STUCK_AFTER_SECONDS for since in list(self.running.values())):
            beat(ready=self.answering.is_set())

    def keep(self, duty: Duty) -> None:
        """One duty's own loop."""
        failures, seen = 0, self.outages
        while not self.stopping.is_set():
            if self.answering.wait(0.5):
                if seen != self.outages:  # a connection kept from before an outage may be dead
                    connections.close_all()
                    seen = self.outages
                wait, failures = self.run_duty(duty, failures)
                self.stopping.wait(wait)
        connections.close_all()

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

    def run_duty(self, duty: Duty, failures: int) -> tuple[float, int]:
        """Run it once: (seconds until its next run, its failures in a row)."""
        outages, self.running[duty.name] = self.outages, time.monotonic()
        try:
            with retries_at_most(0):  # a Redis outage is ridden out below, not inside the duty
                duty.run()
        except Exception as error:  # noqa: BLE001 - whatever a duty raises, the others go on
            del self.running[duty.name]
            connections.close_all()  # a broken connection must not serve the next run
            if self._ridden_out(duty, error, outages):
                return 0.0, failures
            if not failures:
                logger.error("duty %r failed; it runs again with backoff", duty.name, exc_info=error)
            return max(duty.interval, backoff_delay(failures + 1, FAILURE_STEPS)), failures + 1
        del self.running[duty.name]
        close_old_connections()
        if failures:
            logger.warning("duty %r works again after %d failed runs", duty.name, failures)
        return duty.interval, 0

    def _ridden_out(self, duty: Duty, error: Exception, outages: int) -> bool:
        """Whether the failure was an outage, now over (ridden out by this thread or another)."""
        with self.outage:
            if self.outages != outages:  # one began (and ended) while this duty ran
                return True
            down = dependencies_down()
            if not down or self.stopping.is_set():
                return False
            self.answering.clear()
            try:
                self._ride_out(down, duty, error)
            finally:
                self.outages += 1
                self.answering.set()
            return True

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
            down = dependencies_down()
        if not down:
            logger.warning("%s reachable again after %.1f s: carrying on", gone, time.monotonic() - started)
