"""Peak memory of one http_export attempt on a 10 MiB answer, fetched from a real local HTTP server.

    python bench/http_export_memory.py [--mib 10] [--format csv|xlsx]

The attempt runs in a fresh forked process (Django and openpyxl already imported, as in a
work-horse); it prints that process's peak RSS and the growth over the RSS it started with.
"""

import argparse
import json
import os
import resource
import signal
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("VAR_DIR", tempfile.mkdtemp(prefix="bench-export-"))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from reports.kinds import KINDS  # noqa: E402
from reports.kinds.base import RunContext  # noqa: E402


def payload(mib: float) -> bytes:
    record = {"id": 0, "region": "north", "note": "ok", "amount": -5.25, "paid": True}
    count = int(mib * 1024 * 1024 / len(json.dumps(record)))
    items = [dict(record, id=n) for n in range(count)]
    return json.dumps({"data": {"items": items}, "meta": {"count": count}}).encode()


def serve_elsewhere(mib: float) -> tuple[int, int, int]:
    """(pid, port, size) of a forked process that builds the answer and serves it: the measuring process
    never holds the generator's objects."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        body = payload(mib)
        server = serve(body)
        os.write(write, json.dumps([server.server_port, len(body)]).encode())
        os.close(write)
        threading.Event().wait()
    os.close(write)
    with os.fdopen(read) as pipe:
        port, size = json.loads(pipe.read())
    return pid, port, size


def serve(body: bytes) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def measured(run) -> tuple[float, float]:
    """(peak RSS MiB, growth MiB) of run() in a forked child."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        start = rss_kib()
        run()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        os.write(write, json.dumps([peak / 1024, (peak - start) / 1024]).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        result = json.loads(pipe.read())
    os.waitpid(pid, 0)
    return tuple(result)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=float, default=10)
    parser.add_argument("--format", choices=("csv", "xlsx"), default="csv")
    args = parser.parse_args()
    server_pid, port, size = serve_elsewhere(args.mib)
    url = f"http://127.0.0.1:{port}/orders"
    settings.HTTP_EXPORT_ALLOWED_HOSTS = [f"127.0.0.1:{port}"]
    settings.HTTP_EXPORT_MAX_BYTES = size + 1
    settings.HTTP_EXPORT_DEADLINE = 120
    kind = KINDS["http_export"]
    out = Path(tempfile.mkdtemp(prefix="bench-export-out-"))
    ctx = RunContext(task_id=1, public_id="bench", attempt=1, output_dir=out)
    params = kind.validate({"url": url, "format": args.format, "records_path": "data.items"})
    peak, growth = measured(lambda: kind.generate(params, ctx))
    print(f"http_export {args.format}, {args.mib:g} MiB answer: peak RSS {peak:.1f} MiB, "
          f"growth {growth:.1f} MiB")
    os.kill(server_pid, signal.SIGKILL)
    os.waitpid(server_pid, 0)


if __name__ == "__main__":
    main()
