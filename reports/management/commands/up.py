import os
import re
import secrets
import sys
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.core.management.commands.runserver import naiveip_re

from config.backoff import backoff_delay, doubling
from config.embedded_redis import RedisServer
from config.health import dependencies_down
from config.secret_files import write_private_once
from config.supervisor import Child, Supervisor

DEMO_SOURCE_PATH = "/report/demo/orders.json"
# Hosts that listen everywhere: the links and the demo fetch use loopback instead.
WILDCARD_HOSTS = {"0.0.0.0", "[::]", "::"}
WAIT_STEPS = doubling(0.5, 5.0)


def derived_addresses(addr: str, environ: dict[str, str], *, demo_setup: bool) -> dict[str, str]:
    """The settings whose default follows the web address: the console links in alerts, and in
    the demo setup http_export's default source and its allowlist. A value set (non-blank) in the
    environment wins over the derived one."""
    host_port = local_host_port(addr)
    derived = {"CONSOLE_BASE_URL": f"http://{host_port}"}
    if demo_setup:
        derived["HTTP_EXPORT_URL"] = f"http://{host_port}{DEMO_SOURCE_PATH}"
        derived["HTTP_EXPORT_ALLOWED_HOSTS"] = host_port
    return {name: value for name, value in derived.items() if not (environ.get(name) or "").strip()}


def local_host_port(addr: str) -> str:
    """runserver's ADDR as host:port reachable from this machine (a wildcard becomes loopback)."""
    match = re.match(naiveip_re, addr)
    if not match:
        raise CommandError(f"--addr {addr!r} is not a port or address:port")
    host = match["addr"] or "127.0.0.1"
    if host in WILDCARD_HOSTS:
        host = "[::1]" if host.startswith("[") else "127.0.0.1"
    return f"{host}:{match['port']}"


class Command(BaseCommand):
    help = (
        "Start the whole system in the foreground: an embedded redis-server (unless REDIS_URL is set), "
        "migrations, an admin login, demo data, the web server, RQ workers with the scheduler and the "
        "housekeeper. A child that exits (the embedded redis-server too) is restarted; a database that "
        "does not answer is waited for. Ctrl-C stops everything."
    )

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1:8000", help="web address (default %(default)s)")
        parser.add_argument(
            "--workers", type=int, default=2, help="RQ worker processes (default %(default)s)"
        )
        parser.add_argument(
            "--worker-class",
            default=None,
            help="RQ worker class (default: RQ['WORKER_CLASS'], reports.worker.worker.ReportWorker)",
        )
        parser.add_argument("--no-seed", action="store_true",
                            help="skip the demo orders (10,000 on first start)")

    def handle(self, *args, addr, workers, worker_class, no_seed, **options):
        redis_server = None
        env = dict(os.environ)
        host_port = local_host_port(addr)
        derived = derived_addresses(addr, env, demo_setup=settings.DEMO_SETUP)
        env.update(derived)
        if not os.environ.get("REDIS_URL"):
            redis_server = RedisServer(
                settings.VAR_DIR / "redis", unix_socket=settings.EMBEDDED_REDIS_SOCKET
            ).start(own_session=True)
            self.stdout.write(f"embedded redis-server on {redis_server.url}")
        try:
            self._wait_for_the_database()
            call_command("migrate", verbosity=0, interactive=False)
            password = self._ensure_admin()
            if not no_seed:
                # Says what it did (seeded, or found orders and left them): sales figures depend on it.
                self.stdout.write("demo data: ", ending="")
                call_command("seed_demo_data", rows=10_000, stdout=self.stdout)
            manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
            children = [Child("web", lambda _start: manage + ["runserver", addr, "--noreload"])]
            if redis_server:
                # Supervised like the rest: a killed redis-server comes back empty on the same
                # socket, and the reaper re-enqueues what the database says was waiting in it.
                children.insert(0, Child("redis", lambda _start: redis_server.argv(), stop_last=True,
                                         starts=1, process=redis_server.process))
            for n in range(1, workers + 1):
                children.append(Child(f"worker{n}", self._worker_argv(manage, n, worker_class)))
            children.append(Child("housekeeper", lambda _start: manage + ["housekeeper"]))
            for name in ("CONSOLE_BASE_URL", "HTTP_EXPORT_URL", "HTTP_EXPORT_ALLOWED_HOSTS"):
                if name in env or name in derived:
                    origin = "from --addr" if name in derived else "from the environment"
                    value = env.get(name, "")
                    if name == "HTTP_EXPORT_URL" and name not in derived and value.strip():
                        value = "(set; not shown: it may hold the source's credentials)"
                    self.stdout.write(f"{name}={value}  ({origin})")
            self.stdout.write(f"times shown in {settings.TIME_ZONE}, alerts in {settings.ALERT_LANGUAGE} "
                              "(set TIME_ZONE and ALERT_LANGUAGE to change them)")
            self.stdout.write(self.style.SUCCESS(self.console_line(host_port, password)))
            exit_code = Supervisor(
                children,
                env,
                restart_limit=settings.UP_RESTART_LIMIT,
                restart_window=settings.UP_RESTART_WINDOW,
                dependencies_down=dependencies_down,
            ).run()
            if exit_code:
                raise SystemExit(exit_code)
        finally:
            if redis_server:
                redis_server.stop()

    @staticmethod
    def _worker_argv(manage: list[str], n: int, worker_class: str | None):
        def argv(start: int) -> list[str]:
            # A restarted worker takes a new name: the killed one's stays registered in Redis
            # until its key expires, and RQ refuses a second live worker of one name.
            name = f"{os.uname().nodename}-{os.getpid()}-{n}" + (f"-r{start}" if start else "")
            return manage + [
                "rqworker",
                *settings.REPORT_QUEUES,
                "--with-scheduler",
                "--name",
                name,
                *(["--worker-class", worker_class] if worker_class else []),
            ]

        return argv

    def _wait_for_the_database(self) -> None:
        """Until the database answers (a PostgreSQL starting beside `up`, or restarting), asking
        again with backoff; said once."""
        tries = 0
        while "database" in dependencies_down(only=("database",)):
            if not tries:
                self.stderr.write("the database does not answer; waiting for it (Ctrl-C stops)")
            tries += 1
            time.sleep(backoff_delay(tries, WAIT_STEPS))
        if tries:
            self.stdout.write("the database answers")

    @staticmethod
    def console_line(addr: str, password: str | None) -> str:
        """The password appears once, on the start that created the account: terminal scrollback
        and `up`'s captured output (a log file, a CI log) should not hold it on every start."""
        if password:
            return (f"console: http://{addr}/console/  login: admin / {password}  "
                    "(shown once; kept in var/admin_password)")
        return (f"console: http://{addr}/console/  login: admin "
                "(password shown at the first start; see var/admin_password)")

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
