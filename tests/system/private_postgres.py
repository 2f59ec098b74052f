"""A PostgreSQL server of a test's own (initdb in a scratch directory, a free port), so the test can
stop and start it without touching the server every other test uses."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from config.embedded_redis import free_port


class PrivatePostgres:
    def __init__(self):
        bindir = Path(shutil.which("pg_ctl") or "/usr/lib/postgresql/15/bin/pg_ctl").resolve().parent
        self.pg_ctl, initdb = str(bindir / "pg_ctl"), str(bindir / "initdb")
        # PostgreSQL refuses to run as root: as root, its files and processes are the postgres user's.
        self.as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.root = Path(tempfile.mkdtemp(prefix="private-postgres-"))
        if self.as_owner:
            shutil.chown(self.root, "postgres")
        self.port = free_port()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"
        self._run(initdb, "-D", str(self.root / "data"), "-A", "trust", "-U", "postgres", "--no-sync")

    def _run(self, *argv: str) -> None:
        subprocess.run([*self.as_owner, *argv], check=True, capture_output=True, timeout=120)

    def start(self) -> "PrivatePostgres":
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        data, log = str(self.root / "data"), str(self.root / "log")
        self._run(self.pg_ctl, "-D", data, "-o", options, "-l", log, "-w", "start")
        return self

    def stop(self) -> None:
        """A fast shutdown, as `systemctl stop postgresql` does: every connection is cut."""
        self._run(self.pg_ctl, "-D", str(self.root / "data"), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        subprocess.run([*self.as_owner, self.pg_ctl, "-D", str(self.root / "data"), "-m", "immediate",
                        "stop"], capture_output=True, timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)
