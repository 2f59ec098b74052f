"""A real Redis Sentinel setup on free local ports: a master, one replica and three sentinels."""

import subprocess
from pathlib import Path

import redis

from config.embedded_redis import free_port, redis_server_binary
from tests.conftest import wait_until

SERVICE = "mymaster"


class SentinelCluster:
    def __init__(self, workdir: Path, *, down_after_ms: int = 1000, failover_timeout_ms: int = 5000):
        self.workdir = workdir
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.master_port = free_port()
        self.replica_port = free_port()
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.processes: dict[str, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def _spawn(self, name: str, args: list[str]) -> None:
        log = self.workdir / f"{name}.log"
        self.processes[name] = subprocess.Popen(
            [redis_server_binary(), *args, "--logfile", str(log)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=self.workdir,
        )

    def _server_args(self, name: str, port: int) -> list[str]:
        directory = self.workdir / name
        directory.mkdir(exist_ok=True)
        return ["--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
                "--dir", str(directory)]

    def start(self) -> "SentinelCluster":
        self._spawn("master", self._server_args("master", self.master_port))
        self._spawn("replica", self._server_args("replica", self.replica_port)
                    + ["--replicaof", "127.0.0.1", str(self.master_port)])
        for number, port in enumerate(self.sentinel_ports, 1):
            conf = self.workdir / f"sentinel-{number}.conf"  # a sentinel rewrites its file: one each
            conf.write_text(
                f"bind 127.0.0.1\nport {port}\ndir {self.workdir}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.master_port} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} {self.down_after_ms}\n"
                f"sentinel failover-timeout {SERVICE} {self.failover_timeout_ms}\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
            )
            self._spawn(f"sentinel-{number}", [str(conf), "--sentinel"])
        master = redis.Redis(port=self.master_port, socket_timeout=2)
        wait_until(
            lambda: self._quietly(lambda: master.info("replication").get("connected_slaves") == 1),
            timeout=30,
            message=f"the replica to sync ({self.logs()})",
        )
        for port in self.sentinel_ports:
            sentinel = redis.Redis(port=port, socket_timeout=2)
            wait_until(
                lambda s=sentinel: self._quietly(lambda: self._sentinel_sees_everyone(s)),
                timeout=30,
                message=f"sentinel {port} to see the replica and the other sentinels ({self.logs()})",
            )
        return self

    @staticmethod
    def _sentinel_sees_everyone(sentinel: redis.Redis) -> bool:
        state = dict(sentinel.sentinel_master(SERVICE))
        return int(state.get("num-slaves", 0)) >= 1 and int(state.get("num-other-sentinels", 0)) >= 2

    @staticmethod
    def _quietly(check) -> bool:
        try:
            return bool(check())
        except redis.RedisError:
            return False

    def master_address(self) -> tuple[str, int] | None:
        for port in self.sentinel_ports:
            try:
                client = redis.Redis(port=port, socket_timeout=1, decode_responses=True)
                host, master_port = client.sentinel_get_master_addr_by_name(SERVICE)
                return host, int(master_port)
            except (redis.RedisError, TypeError):
                continue
        return None

    def cut_replication(self) -> None:
        """Cut the replica off the master: its link is dropped and its reconnects fail (a wrong
        masterauth), so whatever the master is written from now on exists only there."""
        redis.Redis(port=self.replica_port, socket_timeout=2).config_set("masterauth", "cut-off")
        redis.Redis(port=self.master_port, socket_timeout=2).client_kill_filter(_type="replica")

    def kill_master(self) -> None:
        process = self.processes["master"]
        process.kill()
        process.wait(10)

    def logs(self) -> str:
        return "; ".join(
            f"{path.name}: {path.read_text()[-600:]!r}" for path in sorted(self.workdir.glob("*.log"))
        )[-4000:]

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(10)
