import os
import secrets
import signal
import subprocess
import sys
import threading
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand

from config.embedded_redis import RedisServer
from config.secret_files import write_private_once


class Command(BaseCommand):
    help = (
        "Start the whole system in the foreground: an embedded redis-server (unless REDIS_URL is set), "
        "migrations, an admin login, demo data, the web server, RQ workers with the scheduler, the reaper "
        "and the alert sender. Ctrl-C stops everything."
    )

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1:8000", help="web address (default %(default)s)")
        parser.add_argument(
            "--workers", type=int, default=2, help="RQ worker processes (default %(default)s)"
        )
        parser.add_argument(
            "--worker-class",
            default=None,
            help="RQ worker class (default: RQ['WORKER_CLASS'], reports.worker.process.ReportWorker; "
            "reports.worker.process.SimpleReportWorker runs jobs without forking)",
        )
        parser.add_argument("--no-seed", action="store_true", help="skip the demo orders (10,000 on first start)")

    def handle(self, *args, addr, workers, worker_class, no_seed, **options):
        redis_server = None
        env = dict(os.environ)
        if not os.environ.get("REDIS_URL"):
            redis_server = RedisServer(
                settings.VAR_DIR / "redis", unix_socket=settings.EMBEDDED_REDIS_SOCKET
            ).start()
            self.stdout.write(f"embedded redis-server on {redis_server.url}")
        try:
            call_command("migrate", verbosity=0, interactive=False)
            password = self._ensure_admin()
            if not no_seed:
                # Says what it did (seeded, or found orders and left them): sales figures depend on it.
                self.stdout.write("demo data: ", ending="")
                call_command("seed_demo_data", rows=10_000, stdout=self.stdout)
            manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
            commands = {"web": manage + ["runserver", addr, "--noreload"]}
            for n in range(1, workers + 1):
                commands[f"worker{n}"] = manage + [
                    "rqworker",
                    *settings.REPORT_QUEUES,
                    "--with-scheduler",
                    "--name",
                    f"{os.uname().nodename}-{os.getpid()}-{n}",
                    *(["--worker-class", worker_class] if worker_class else []),
                ]
            commands["reaper"] = manage + ["reap_tasks", "--loop"]
            commands.update(self.extra_processes(manage))
            self.stdout.write(self.style.SUCCESS(self.console_line(addr, password)))
            self._supervise(commands, env)
        finally:
            if redis_server:
                redis_server.stop()

    def extra_processes(self, manage):
        """Further long-running duties of installed apps (the alert sender) as name -> argv."""
        return {"alerts": manage + ["send_alerts", "--loop"]} if "send_alerts" in get_commands() else {}

    @staticmethod
    def console_line(addr: str, password: str | None) -> str:
        """The password appears once, on the start that created the account: terminal scrollback
        and `up`'s captured output (a log file, a CI log) should not hold it on every start."""
        if password:
            return f"console: http://{addr}/console/  login: admin / {password}  (shown once; kept in var/admin_password)"
        return f"console: http://{addr}/console/  login: admin (password shown at the first start; see var/admin_password)"

    def _ensure_admin(self) -> str | None:
        """The new admin's password when this call created the account, else None."""
        user_model = get_user_model()
        if user_model.objects.filter(username="admin").exists():
            return None
        password = os.environ.get("CONSOLE_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        user_model.objects.create_superuser("admin", "admin@example.invalid", password)
        password_file = settings.VAR_DIR / "admin_password"
        password_file.unlink(missing_ok=True)  # left by an earlier database; this one's admin is new
        write_private_once(password_file, password)
        return password

    def _supervise(self, commands: dict[str, list[str]], env: dict[str, str]) -> None:
        processes: dict[str, subprocess.Popen] = {}
        width = max(map(len, commands))
        lock = threading.Lock()

        def pump(name, stream):
            for line in iter(stream.readline, ""):
                with lock:
                    sys.stdout.write(f"{name:<{width}} | {line}")
                    sys.stdout.flush()

        for name, argv in commands.items():
            proc = subprocess.Popen(
                argv,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            processes[name] = proc
            threading.Thread(target=pump, args=(name, proc.stdout), daemon=True).start()

        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        exit_code = 0
        while not stop.is_set():
            for name, proc in processes.items():
                if proc.poll() is not None:
                    self.stderr.write(f"{name} exited with {proc.returncode}; stopping everything")
                    exit_code = 1
                    stop.set()
                    break
            stop.wait(0.5)
        for proc in processes.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in processes.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        if exit_code:
            raise SystemExit(exit_code)
