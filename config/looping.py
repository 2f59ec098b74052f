"""The loop behind every `--loop` management command: one pass, then a wait that SIGTERM or
Ctrl-C cuts short, with the database connections refreshed between passes."""

import signal
import time
from collections.abc import Callable

from django.db import close_old_connections


def run_passes(one_pass: Callable[[], None], *, loop: bool, interval: float) -> None:
    """Call `one_pass` once, or, with `loop`, every `interval` seconds until SIGTERM/SIGINT.

    A pass that is running when the signal arrives finishes; the loop ends after it."""
    stopping: list[bool] = []
    if loop:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stopping.append(True))
    while True:
        one_pass()
        if not loop:
            return
        close_old_connections()
        deadline = time.monotonic() + interval
        while not stopping and time.monotonic() < deadline:
            time.sleep(min(0.2, interval))
        if stopping:
            return
