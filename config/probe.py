"""Liveness and readiness of the processes that have no HTTP port: workers and the housekeeper.

Each turn of such a process's loop calls `beat(ready=...)`, ready meaning that its database and
Redis answered on that turn. With PROBE_FILE set (the container image sets it) the beat writes
when the loop last turned and whether it was ready; `report-probe live|ready`
(deploy/container/probe, no Django, so a probe costs milliseconds) reads it: live while the last
turn is younger than STALE_SECONDS, ready while live and ready. A frozen process (`kill -STOP`, a
deadlock) stops beating and fails its liveness; a process riding out a database outage keeps
beating, live but not ready. Under systemd with `WatchdogSec=` the beat also pings the watchdog
(sd_notify), so systemd restarts a frozen process. A command rather than a port: a worker serves
no HTTP, and a file write per second costs nothing.
"""

import json
import os
import socket
import time

STALE_SECONDS = 15.0  # deploy/container/probe reads the same figure from the file
_last = {"at": 0.0, "ready": None}


def beat(*, ready: bool) -> None:
    """Note one turn of the loop (at most one write a second, or at once when readiness changes)."""
    now = time.time()
    if now - _last["at"] < 1.0 and ready == _last["ready"]:
        return
    _last.update(at=now, ready=ready)
    path = os.environ.get("PROBE_FILE")
    if path:
        partial = f"{path}.{os.getpid()}"
        with open(partial, "w") as out:
            json.dump({"at": now, "ready": ready, "pid": os.getpid(), "stale_after": STALE_SECONDS}, out)
        os.replace(partial, path)
    _notify_systemd(b"READY=1\nWATCHDOG=1" if ready else b"WATCHDOG=1")


def _notify_systemd(message: bytes) -> None:
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.sendto(message, address)
        except OSError:
            pass  # systemd gone or restarting: the next beat tries again
