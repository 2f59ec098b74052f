"""A PostgreSQL server of a test's own (Debian's binaries, a fresh cluster on a free port, trust
authentication on 127.0.0.1), to stop and start again under a running site. Run as root, the server
runs as the postgres account, as PostgreSQL insists."""

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from config.embedded_redis import free_port


def _binary(name: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=lambda p: int(p.parts[-3]))
    if not found:
        raise AssertionError(f"no {name}: install PostgreSQL's server (apt-get install -y postgresql)")
    return str(found[-1])


class PrivatePostgres:
    def __init__(self):
        self.port = free_port()
        # Not under pytest's tmp_path: the postgres account cannot enter root's private directories.
        self.workdir = Path(tempfile.mkdtemp(prefix="private-postgres-"))
        self.datadir = self.workdir / "data"
        self.log = self.workdir / "server.log"
        self.owner = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        if self.owner:
            os.chown(self.workdir, self.owner.pw_uid, self.owner.pw_gid)

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *argv: str) -> None:
        command = ["runuser", "-u", "postgres", "--", *argv] if self.owner else list(argv)
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise AssertionError(f"{' '.join(argv)} failed: {result.stdout}{result.stderr}{log}")

    def start(self) -> "PrivatePostgres":
        if not self.datadir.exists():
            self._run(
                _binary("initdb"), "-D", str(self.datadir), "-U", "postgres", "-A", "trust", "--no-sync"
            )
        options = f"-p {self.port} -k {self.workdir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            _binary("pg_ctl"), "-D", str(self.datadir), "-l", str(self.log), "-o", options, "-w", "start"
        )
        return self

    def stop(self) -> None:
        """A fast shutdown, as a restart or a failover does it: every connection is terminated."""
        self._run(_binary("pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop")

    def create_database(self, name: str) -> str:
        self._run(_binary("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        return self.url(name)

    def remove(self) -> None:
        if (self.datadir / "postmaster.pid").exists():
            self._run(_binary("pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.workdir, ignore_errors=True)
