"""Shared fixtures: a real redis-server per test session, real worker processes, a real database.

Nothing here fakes Redis or the ORM. Worker processes share the test database (a file for
SQLite, the test database for PostgreSQL), so tests that run them use `transactional_db`.
"""

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from django.conf import settings
from django.db import connection

from config.embedded_redis import RedisServer
from config.storage import storages_setting
from tests.storage_server import S3Server
from transport.connection import _redis

BASE_DIR = Path(__file__).resolve().parent.parent
S3_SETTING_NAMES = (
    "REPORT_STORAGE",
    "AWS_S3_ENDPOINT_URL",
    "AWS_STORAGE_BUCKET_NAME",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_S3_REGION_NAME",
    "AWS_S3_ADDRESSING_STYLE",
    "AWS_LOCATION",
)


def wait_until(predicate, *, timeout: float = 30.0, interval: float = 0.05, message: str = "condition"):
    """Poll until predicate() is truthy; fail with `message` at the deadline. Returns the value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    settings.REDIS_URL = server.url
    for config in settings.RQ_QUEUES.values():
        config["URL"] = server.url
    _redis.cache_clear()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def redis_conn(redis_server):
    """A clean Redis for every test."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    yield client
    client.close()


@pytest.fixture(autouse=True)
def default_language():
    """Every test starts in LANGUAGE_CODE: a request in Chinese (LocaleMiddleware activates the
    language for the thread) must not leave the next test's output in Chinese."""
    from django.utils import translation

    translation.deactivate()
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def live_console_aggregates(settings):
    """Tests see every change at once; the caching itself has its own test."""
    from django.core.cache import cache

    settings.CONSOLE_DASHBOARD_CACHE_SECONDS = 0
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def media_root(tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.ARCHIVE_DIR = tmp_path / "archive"
    if settings.REPORT_STORAGE == "filesystem":
        settings.STORAGES = storages_setting("filesystem", archive_dir=settings.ARCHIVE_DIR)
    return settings.MEDIA_ROOT


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    server = S3Server(tmp_path_factory.mktemp("s3")).start()
    yield server
    server.stop()


@pytest.fixture(params=["filesystem", "s3"])
def report_storage(request, settings, media_root):
    """Run the test on each storage backend; on S3 under a key prefix of its own. Worker processes
    started afterwards inherit the choice (subprocess_env)."""
    if request.param == "s3":
        values = request.getfixturevalue("s3_server").settings(f"test-{uuid.uuid4().hex[:12]}")
        for name, value in values.items():
            setattr(settings, name, value)
        settings.STORAGES = storages_setting(
            "s3", archive_dir=settings.ARCHIVE_DIR, bucket=values["AWS_STORAGE_BUCKET_NAME"],
            location=values["AWS_LOCATION"],
        )
    return request.param


def stored_names(storage, prefix: str) -> list[str]:
    """Every file under prefix in a storage, through the storage API (any backend)."""
    try:
        dirs, files = storage.listdir(prefix)
    except FileNotFoundError:
        return []
    names = [f"{prefix}/{name}" for name in files]
    for name in dirs:
        names += stored_names(storage, f"{prefix}/{name}")
    return sorted(names)


def worker_pid_of_running_attempt(task) -> int:
    """The worker process that claimed the task's current attempt (the attempt row names it)."""
    from reports.models import AttemptOutcome

    attempt = task.attempts.get(number=task.attempt, outcome=AttemptOutcome.RUNNING)
    return int(attempt.worker.rsplit("pid ", 1)[1])


def children_of(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def freeze_between_heartbeats(worker, task) -> None:
    """SIGSTOP the worker just after a heartbeat committed (so its horse runs: the heartbeat is
    its worker's loop while it waits on the horse). Frozen inside one, it would hold SQLite's write
    lock and stall every other process, which no real partition does to them."""
    from reports.models import ReportTask

    for _ in range(5):
        lease = ReportTask.objects.values_list("lease_expires_at", flat=True).get(pk=task.pk)
        wait_until(
            lambda lease=lease: ReportTask.objects.values_list("lease_expires_at", flat=True).get(pk=task.pk)
            != lease,
            interval=0.005,
            message="a heartbeat",
        )
        os.kill(worker.pid, signal.SIGSTOP)
        # On a loaded machine the stop can land after the heartbeat, in the write that follows it
        # (the promotion of due retries): then let the worker go on and wait for the next beat.
        if not _sqlite_write_lock_held():
            return
        os.kill(worker.pid, signal.SIGCONT)
    raise AssertionError("the worker was inside a write each of the 5 times it was frozen")


def _sqlite_write_lock_held() -> bool:
    import sqlite3

    from django.db import connection

    if connection.vendor != "sqlite":
        return False
    probe = sqlite3.connect(connection.settings_dict["NAME"], timeout=0.5, isolation_level=None)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        probe.close()


def has_exited(pid: int) -> bool:
    """The process is gone or a zombie (exited, not yet reaped by its parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")


def work_horse_of(worker_pid: int, *, timeout: float = 30.0) -> int:
    """The work-horse a forking worker runs: its child in a process group of its own (RQ's
    scheduler, the other child, stays in the worker's group)."""

    def horse():
        for child in children_of(worker_pid):
            try:
                if os.getpgid(child) == child:
                    return child
            except ProcessLookupError:
                continue
        return None

    return wait_until(horse, timeout=timeout, interval=0.01, message=f"a work-horse of worker {worker_pid}")


def horse_pid_of_running_attempt(task) -> int:
    """The work-horse running the task's current attempt: a pool worker names it in the attempt
    row ("<worker> horse <pid> pid <pid>"); a forking worker has only the one."""
    from reports.models import AttemptOutcome

    worker = task.attempts.get(number=task.attempt, outcome=AttemptOutcome.RUNNING).worker
    if " horse " in worker:
        return int(worker.rsplit(" horse ", 1)[1].split()[0])
    return work_horse_of(worker_pid_of_running_attempt(task))


def database_url_for_subprocesses() -> str:
    """The URL of the database this test session uses (the test database, not the configured one)."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = quote(db.get("USER") or "")
    password = quote(db.get("PASSWORD") or "")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{auth}{host}:{port}/{db['NAME']}"


@pytest.fixture
def subprocess_env(transactional_db, redis_server, media_root, settings):
    """Factory for the environment of worker/reaper processes: same database, Redis, media root
    and policy settings as this test has at the moment of the call."""
    return lambda: _subprocess_env(redis_server, media_root, settings)


def _subprocess_env(redis_server, media_root, settings):
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE",)}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=database_url_for_subprocesses(),
        REDIS_URL=redis_server.url,
        MEDIA_ROOT=str(media_root),
        VAR_DIR=str(settings.VAR_DIR),
        REPORT_RETRY_BACKOFF=",".join(str(s) for s in settings.REPORT_RETRY_BACKOFF),
        REPORT_RETRY_JITTER=str(settings.REPORT_RETRY_JITTER),
        REPORT_LEASE_GRACE=str(settings.REPORT_LEASE_GRACE),
        REPORT_MAX_ATTEMPTS=str(settings.REPORT_MAX_ATTEMPTS),
        REPORT_JOB_TIMEOUT=str(settings.REPORT_JOB_TIMEOUT),
        REPORT_HEARTBEAT_SECONDS=str(settings.REPORT_HEARTBEAT_SECONDS),
        REPORT_WORKER_CONCURRENCY=str(settings.REPORT_WORKER_CONCURRENCY),
        REPORT_HORSE_MAX_TASKS=str(settings.REPORT_HORSE_MAX_TASKS),
        REPORT_HORSE_MAX_RSS_MB=str(settings.REPORT_HORSE_MAX_RSS_MB),
        REPORT_LEASE_SECONDS=str(settings.REPORT_LEASE_SECONDS),
        PYTHONUNBUFFERED="1",
    )
    if settings.REPORT_STORAGE == "s3":
        env.update({name: str(getattr(settings, name) or "") for name in S3_SETTING_NAMES})
    return env


class WorkerProcess:
    """`manage.py rqworker` as a real child process, killable like production would see it."""

    def __init__(
        self,
        env: dict,
        log_path: Path,
        *,
        name: str,
        queues=("high", "default", "low"),
        scheduler=True,
        worker_class: str | None = None,
        wrapper: tuple[str, ...] = (),
    ):
        self.name = name
        self.log_path = log_path
        argv = [*wrapper, sys.executable, str(BASE_DIR / "manage.py"), "rqworker", *queues, "--name", name]
        if scheduler:
            argv.append("--with-scheduler")
        if worker_class:
            argv += ["--worker-class", worker_class]
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(
            argv, cwd=BASE_DIR, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, conn: redis.Redis, timeout: float = 30.0) -> "WorkerProcess":
        key = f"rq:worker:{self.name}".encode()
        wait_until(
            lambda: key in conn.smembers("rq:workers") or self.process.poll() is not None,
            timeout=timeout,
            message=f"worker {self.name} to register",
        )
        if self.process.poll() is not None:
            raise AssertionError(f"worker {self.name} exited early:\n{self.output()}")
        return self

    def kill(self, sig=signal.SIGKILL, timeout: float = 10) -> None:
        if self.process.poll() is None:
            os.kill(self.pid, sig)
            self.process.wait(timeout)

    def stop(self) -> None:
        # The whole group: a parent killed earlier can leave its horse and scheduler behind.
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(10)
        self.log.close()

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()


_worker_numbers = itertools.count(1)


@pytest.fixture
def start_worker(subprocess_env, redis_conn, tmp_path, request):
    """Factory: start_worker(**env) starts a worker process (RQ["WORKER_CLASS"], the pool worker,
    unless worker_class says otherwise; under `wrapper`, a command that execs the rest, if given)
    and waits until it listens.

    Workers do not promote due retries: the housekeeper does. Beside the first worker, the
    housekeeper's own "due retries" duty runs in a thread of this process (its loop, its interval),
    so a retry runs as it would in production without a housekeeper process per test; the tests
    of the other duties start one (tests/housekeeper.py)."""
    started: list[WorkerProcess] = []
    promoter = None

    def start(
        *, scheduler=True, queues=("high", "default", "low"), worker_class=None, name_prefix="test-worker",
        wrapper=(), **env_overrides,
    ) -> WorkerProcess:
        env = dict(subprocess_env(), **{k: str(v) for k, v in env_overrides.items()})
        name = f"{name_prefix}-{next(_worker_numbers)}-{os.getpid()}"
        worker = WorkerProcess(
            env, tmp_path / f"{name}.log", name=name, queues=queues, scheduler=scheduler,
            worker_class=worker_class, wrapper=wrapper,
        )
        started.append(worker)
        nonlocal promoter
        promoter = promoter or _DutyThread("due retries")
        return worker.wait_ready(redis_conn)

    yield start
    if promoter is not None:
        promoter.stop()
    for worker in started:
        worker.stop()
        if getattr(request.node, "rep_call_failed", False):
            print(f"--- log of {worker.name} ---\n{worker.output()[-6000:]}")


class _DutyThread:
    """One duty of the housekeeper (reports/housekeeper/loop.py), kept in a thread until stopped."""

    def __init__(self, name: str):
        from reports.housekeeper.duties import every_duty
        from reports.housekeeper.loop import Housekeeper

        (duty,) = [duty for duty in every_duty() if duty.name == name]
        self.housekeeper = Housekeeper([duty])
        self.thread = threading.Thread(target=self.housekeeper.keep, args=(duty,), daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.housekeeper.stopping.set()
        self.thread.join(30)


@pytest.fixture
def fast_retries(settings):
    """No backoff, so retry chains finish in test time (the backoff itself has its own test)."""
    settings.REPORT_RETRY_BACKOFF = (0.0,)
    settings.REPORT_RETRY_JITTER = 0.0
    return settings


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.rep_call_failed = report.failed
    return report


# --- Browser (Playwright driving Debian's chromium, found or installed by tests/browser.py) ----


_BROWSER = pytest.StashKey[str]()
_NO_BROWSER = pytest.StashKey[str]()


# Whole modules whose proof does not depend on the session's database (docs, layering, catalogue,
# the OpenAPI linters, settings read in subprocesses, `up` on its own SQLite): database_blind
# without a marker each.
_BLIND_MODULES = (
    "tests/docs/", "tests/test_layers.py", "tests/test_locale.py", "tests/api/test_openapi_lint.py",
    "tests/config/test_env.py", "tests/config/test_settings_count.py", "tests/config/test_backoff.py",
    "tests/system/test_up.py",
)


def _blind_session(item) -> str | None:
    """The one CI session that runs a database_blind test: its marker's `on`, else SQLite's; None
    for a test whose proof does depend on the database."""
    marker = item.get_closest_marker("database_blind")
    if marker is not None:
        return marker.kwargs.get("on", "sqlite")
    if item.get_closest_marker("browser"):  # what a page looks like and does: the views' tests run on both
        return "sqlite"
    return "sqlite" if item.path.relative_to(BASE_DIR).as_posix().startswith(_BLIND_MODULES) else None


def pytest_collection_modifyitems(config, items):
    """The long tests first (browser, slow), so that with `-n` (pytest-xdist) they spread over the
    workers from the start instead of ending the run on one of them.

    Find (or install) the browser once, before any test runs, and only when browser tests are
    selected. Without one, the first browser test fails with the one line that says what to do and
    the others are deselected: the run fails, and says why once."""
    if os.environ.get("TESTS_SPLIT_DATABASE_BLIND") == "1":
        # CI's two sessions (the same suite on each database) run a test whose proof does not
        # depend on the database once, in the session its marker names.
        session = "postgresql" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "sqlite"
        here = {item for item in items if _blind_session(item) in (None, session)}
        config.hook.pytest_deselected(items=[item for item in items if item not in here])
        items[:] = [item for item in items if item in here]
    items.sort(key=lambda item: not (item.get_closest_marker("browser") or item.get_closest_marker("slow")))
    browser_items = [item for item in items if item.get_closest_marker("browser")]
    if not browser_items:
        return
    from tests.browser import NoBrowser, browser_executable

    try:
        config.stash[_BROWSER] = browser_executable()
    except NoBrowser as exc:
        config.stash[_NO_BROWSER] = str(exc)
        rest = set(browser_items[1:])
        items[:] = [item for item in items if item not in rest]
        config.hook.pytest_deselected(items=list(rest))


@pytest.fixture(scope="session")
def _playwright_browser(pytestconfig):
    from playwright.sync_api import expect, sync_playwright

    # expect() polls until its condition holds; Playwright's own deadline (5 s) is shorter than a
    # page round trip on a loaded 2-core machine, so it gets the same 15 s as every page action.
    expect.set_options(timeout=15_000)

    if _NO_BROWSER in pytestconfig.stash:
        pytest.fail(pytestconfig.stash[_NO_BROWSER], pytrace=False)
    executable = pytestconfig.stash[_BROWSER]
    # Playwright's sync API keeps an event loop in this thread; the ORM calls the tests
    # make between page actions are still synchronous and safe.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(_playwright_browser, live_server):
    """A fresh browser context per test; `page.base_url` is the live server's address."""
    context = _playwright_browser.new_context(base_url=live_server.url,
                                              viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def operator(transactional_db, django_user_model):
    """A staff user in the Operators group (view, replay, archive/discard) with a known password."""
    user = django_user_model.objects.create_user("operator", "op@example.invalid", "operator-pass-1",
                                                 is_staff=True)
    user.groups.add(operators_group())
    return user


def operators_group():
    """The group the data migration creates; transactional tests flush it, so re-create it the same way."""
    import importlib

    from django.contrib.auth.models import Group, Permission

    migration = importlib.import_module("deadletters.migrations.0002_operators_group")
    edit = importlib.import_module("deadletters.migrations.0003_replay_edit_permission")
    params = importlib.import_module("deadletters.migrations.0014_params_permission")
    group, _ = Group.objects.get_or_create(name="Operators")
    for app_label, codename in [*migration.OPERATOR_PERMISSIONS, edit.EDIT_PERMISSION, params.VIEW_PARAMS]:
        group.permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return group


def browser_login(page, username="operator", password="operator-pass-1", next_path="/console/"):
    page.goto(f"/console/login/?next={next_path}")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")


# --- JSON API ------------------------------------------------------------------


@pytest.fixture
def api_token(db):
    """A fresh active API token's raw value (as create_api_token prints it once), with every scope
    (operator included: it sees every task, as the tests' factories make owner-less ones)."""
    from reports.models import ApiScope
    from reports.services.tokens import create_api_token

    return create_api_token(name="test-client", scopes=ApiScope.values)[1]


@pytest.fixture
def token_client(client, api_token):
    """Django's test client sending `Authorization: Bearer <api_token>` on every request."""
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {api_token}"
    return client


# --- Alerts (DingTalk) -----------------------------------------------------------


@pytest.fixture
def fake_dingtalk(settings):
    """Factory: fake_dingtalk(secret=..., keyword=..., clock=...) starts a fake DingTalk robot on a
    free local port and points the DINGTALK_* settings at it (rate 20/min, short timeout)."""
    from tests.dingtalk_fake import FakeDingTalk

    robots = []

    def start(*, secret="SECfake-robot-secret-9f8e7d6c5b4a", keyword="", configure=True, **options):
        robot = FakeDingTalk(secret=secret, keyword=keyword, **options).start()
        robots.append(robot)
        if configure:
            settings.DINGTALK_WEBHOOK = robot.webhook
            settings.DINGTALK_SECRET = secret
            settings.DINGTALK_KEYWORD = keyword
            settings.DINGTALK_AT_MOBILES = []
            settings.DINGTALK_RATE_PER_MINUTE = 20
            settings.DINGTALK_TIMEOUT = 1.0
            settings.DINGTALK_WRAP_LINKS = False
            settings.CONSOLE_BASE_URL = "https://console.example.invalid"
        return robot

    yield start
    for robot in robots:
        robot.stop()


def make_death(*, kind="probe", error_type="reports.errors.PermanentError", message="bad parameter 'x'"):
    """A task dies through the real path (record_attempt_failure -> create_dead_letter -> outbox)."""
    from django.utils import timezone

    from deadletters.models import DeadLetter
    from reports.models import ReportTask, TaskAttempt, TaskStatus
    from reports.services import FailureInfo, record_attempt_failure

    task = ReportTask.objects.create(
        kind=kind, params={}, max_attempts=3, timeout_seconds=300, status=TaskStatus.RUNNING, attempt=1
    )
    TaskAttempt.objects.create(task=task, number=1, started_at=timezone.now(), worker="test pid 1")
    failure = FailureInfo(
        error_type=error_type, message=message, traceback=f"Traceback\n{error_type}: {message}",
        retriable=False,
    )
    assert record_attempt_failure(task_id=task.pk, attempt=1, failure=failure) == TaskStatus.DEAD
    return DeadLetter.objects.get(task=task)


# --- A kind's upstream and its circuit breaker ---------------------------------------------------


@pytest.fixture
def upstream_kind(settings, monkeypatch):
    """http_export with a default source (a tests.upstream_fake.FakeUpstream, returned) and its
    circuit breaker scaled down by the kind's attributes: open after 3 upstream failures, probed at
    every housekeeper pass, closed after 2 passing probes and a canary of 2. Worker processes read
    the thresholds from the breaker's row, born here."""
    import math

    from reports.kinds.http_export import HttpExport
    from reports.services import breakers, concurrency
    from tests.upstream_fake import FakeUpstream

    upstream = FakeUpstream().start()
    settings.HTTP_EXPORT_URL = upstream.url
    settings.HTTP_EXPORT_ALLOWED_HOSTS = [upstream.host_port]
    scaled = dict(breaker_failures=3, breaker_probes=2, breaker_probe_every=0.0, breaker_probe_timeout=1.0,
                  breaker_canary=2)
    for name, value in scaled.items():
        monkeypatch.setattr(HttpExport, name, value)
    monkeypatch.setattr(concurrency, "_overrides", (-math.inf, {}))  # no override read in another test
    breakers.breaker_of("http_export")
    yield upstream
    upstream.stop()
    concurrency._overrides = (-math.inf, {})
