"""Settings read from environment variables; every default is safe for a laptop.

Production sets at least SECRET_KEY, DATABASE_URL, REDIS_URL, ALLOWED_HOSTS and
CONSOLE_BASE_URL. The README lists every variable.
"""

import os
from pathlib import Path

import dj_database_url

from config import redis_client
from config.env import (
    env_bool,
    env_choice,
    env_float,
    env_float_list,
    env_int,
    env_kind_map,
    env_list,
    env_networks,
    env_rate,
    env_str,
)
from config.languages import LANGUAGES
from config.observability import logging_config, sentry_init, tracing_init
from config.secret_files import private_dir, private_file, read_or_create_secret
from config.storage import storages_setting

BASE_DIR = Path(__file__).resolve().parent.parent
# var/ holds the secret key, the admin password, the SQLite database and the report files: 0700.
VAR_DIR = private_dir(Path(env_str("VAR_DIR", str(BASE_DIR / "var"))))
# A per-checkout random key when none is set: never a well-known default, stable across restarts.
SECRET_KEY = env_str("SECRET_KEY") or read_or_create_secret(VAR_DIR / "secret_key")
DEBUG = env_bool("DEBUG", False)
# Error reports (the DEBUG page, mailed 500s) also hide DATABASE_URL, REDIS_URL, DINGTALK_WEBHOOK
# and any URL's password or access_token, in settings, request.META (the environment) and locals.
DEFAULT_EXCEPTION_REPORTER_FILTER = "config.error_reports.SafeSettingsFilter"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "django_rq",
    "csp",
    "axes",
    # The layers, lowest first: each imports only those above it in this list.
    "reports",
    "deadletters",
    "console",
    "api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The page's language: the operator's stored choice (console.language, after authentication),
    # else the language cookie the header switch sets, else the browser's Accept-Language.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "config.session_timeout.SessionTimeoutMiddleware",
    "console.language.OperatorLanguageMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.unavailable.RedisRetriesMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# Content-Security-Policy: the console's pages load scripts, styles and images from static/ only,
# with no inline script, inline event handler or inline style (htmx is told not to inject its
# indicator styles). A script injected through a bug in a template has nowhere to run. The
# admin is Django's own and keeps its defaults.
CONTENT_SECURITY_POLICY = {
    "EXCLUDE_URL_PREFIXES": ["/admin/"],
    "DIRECTIVES": {
        "default-src": ["'none'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'none'"],
    },
}

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.template.context_processors.i18n",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}")
# A web process keeps its database connection for DB_CONN_MAX_AGE seconds instead of opening one per
# request (PostgreSQL's connect, authentication and fork cost more than a submit's own queries), and
# checks it before reusing it after an error or an idle spell. Behind a pooler in transaction mode
# (PgBouncer) the kept connection is one to the pooler, which lends a server connection for each
# transaction; 0 opens and closes one per request, as without this setting.
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 600, minimum=0), conn_health_checks=True
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web, workers and the reaper write from separate processes: WAL lets readers
    # run beside a writer, IMMEDIATE takes the write lock up front so two writers
    # queue on the busy timeout instead of failing with "database is locked".
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
    if (DATABASES["default"]["NAME"] not in ("", ":memory:")
            and Path(DATABASES["default"]["NAME"]).parent.is_dir()):
        private_file(Path(DATABASES["default"]["NAME"]))
    # A file, not :memory:, so worker processes started by the tests see the same data.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
else:
    if "postgresql" in DATABASES["default"]["ENGINE"]:
        # libpq waits forever for an unreachable server by default.
        DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 10)
    # One test database per test session, so sessions on one server (CI's two runs, a developer's
    # parallel checkouts) never drop each other's database.
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# PostgreSQL: the claim and the completion as prepared statements (0 behind a pooler in
# transaction mode that does not keep them: PgBouncer before 1.21, or without max_prepared_statements).
REPORT_DB_PREPARED_STATEMENTS = env_bool("REPORT_DB_PREPARED_STATEMENTS", True)

# --- Redis and RQ -------------------------------------------------------------
# Unset REDIS_URL means the embedded redis-server that `manage.py up` starts on
# a unix socket under var/; production points this at a real Redis.
EMBEDDED_REDIS_SOCKET = VAR_DIR / "redis.sock"
REDIS_URL = env_str("REDIS_URL", f"unix://{EMBEDDED_REDIS_SOCKET}?db=0")
REPORT_QUEUES = ("high", "default", "low")
# Jobs carry only integers, so they are JSON: unpickling what sits in Redis would run whatever
# code anyone able to write there put in it.
JOB_SERIALIZER = "transport.serializer.JobSerializer"
# Every Redis client comes from config.redis_client (plain URLs and redis+sentinel://), with these
# timeouts and a bounded number of reconnects that rides through a Sentinel failover (10 retries:
# 10-21 s; a failover takes the sentinels' down-after-milliseconds plus a few seconds).
REDIS_CONNECT_TIMEOUT = env_float("REDIS_CONNECT_TIMEOUT", 5.0, minimum=0.1)
REDIS_SOCKET_TIMEOUT = env_float("REDIS_SOCKET_TIMEOUT", 15.0, minimum=0.1)
REDIS_RETRY_ATTEMPTS = env_int("REDIS_RETRY_ATTEMPTS", 10, minimum=0)
# Load balancers probe each machine over plain HTTP: SECURE_SSL_REDIRECT must not answer them 301.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
RQ_QUEUES = {
    name: {
        **redis_client.rq_queue_connection(REDIS_URL, socket_timeout=REDIS_SOCKET_TIMEOUT),
        "DEFAULT_TIMEOUT": 360,
        "SERIALIZER": JOB_SERIALIZER,
    }
    for name in REPORT_QUEUES
}
# rqworker (and `manage.py up`) start our worker (reports/worker/worker.py): it claims each attempt,
# heartbeats its lease and records its outcome; a pool of long-lived horses runs the jobs
# (REPORT_HORSE_MAX_TASKS=1: a fresh horse per job). A worker runs only the job functions the
# apps declared (transport.registry).

# A worker's horses (jobs at once), and when a horse is replaced by a fresh one.
REPORT_WORKER_CONCURRENCY = env_int("REPORT_WORKER_CONCURRENCY", os.cpu_count() or 1, minimum=1)
REPORT_HORSE_MAX_TASKS = env_int("REPORT_HORSE_MAX_TASKS", 1000, minimum=1)
REPORT_HORSE_MAX_RSS_MB = env_int("REPORT_HORSE_MAX_RSS_MB", 512, minimum=16)
RQ = {
    "COMMIT_MODE": "auto",  # we enqueue on commit ourselves
    "WORKER_CLASS": "reports.worker.worker.ReportWorker",
    "JOB_CLASS": "transport.registry.AllowlistedJob",
}
RQ_SHOW_ADMIN_LINK = False

# --- `manage.py up` -----------------------------------------------------------
# `up` restarts a child that exits (0.5 s, then doubling up to 8 s). One that exits more than
# UP_RESTART_LIMIT times within UP_RESTART_WINDOW seconds is crash-looping: `up` stops everything.
UP_RESTART_LIMIT = env_int("UP_RESTART_LIMIT", 5, minimum=0)
UP_RESTART_WINDOW = env_float("UP_RESTART_WINDOW", 60.0, minimum=1.0)

# --- Report tasks -------------------------------------------------------------
REPORT_MAX_ATTEMPTS = env_int("REPORT_MAX_ATTEMPTS", 3, minimum=1)
REPORT_RETRY_BACKOFF = env_float_list("REPORT_RETRY_BACKOFF", "10,30,60")
REPORT_RETRY_JITTER = env_float("REPORT_RETRY_JITTER", 0.2, minimum=0)
REPORT_JOB_TIMEOUT = env_int("REPORT_JOB_TIMEOUT", 300, minimum=1)
# A running attempt's lease: its worker renews it every REPORT_HEARTBEAT_SECONDS; the reaper takes
# the attempt back (abandoned) once it has not been renewed for REPORT_LEASE_SECONDS.
REPORT_HEARTBEAT_SECONDS = env_float("REPORT_HEARTBEAT_SECONDS", 3.0, minimum=0.1)
REPORT_LEASE_SECONDS = env_float("REPORT_LEASE_SECONDS", 12.0, minimum=0.3)
if REPORT_LEASE_SECONDS < 2 * REPORT_HEARTBEAT_SECONDS:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("REPORT_LEASE_SECONDS must be at least twice REPORT_HEARTBEAT_SECONDS")
# Attempts run by a worker that does not heartbeat (a plain rq.Worker) lease timeout + grace, and so
# do concurrency slots, whose holder may die without releasing them.
REPORT_LEASE_GRACE = env_int("REPORT_LEASE_GRACE", 30, minimum=0)
# A database statement of a worker process (claim, heartbeat, outcome) is cancelled after this many
# seconds (PostgreSQL; SQLite stops waiting for its write lock), so a stuck database is logged and
# retried instead of hanging the worker.
REPORT_WORKER_DB_TIMEOUT = env_float("REPORT_WORKER_DB_TIMEOUT", 30.0, minimum=0.1)
# How long a pending/retrying task may sit past its due time with no RQ job
# before the reaper enqueues it again.
REPORT_REENQUEUE_AFTER = env_int("REPORT_REENQUEUE_AFTER", 30, minimum=0)
# The housekeeper's reaper duties (lapsed leases, lost jobs) run every this many seconds: a few
# indexed queries each; a worker killed whole is noticed within REPORT_LEASE_SECONDS + this.
REAPER_INTERVAL = env_int("REAPER_INTERVAL", 5, minimum=1)

# The embedded single-machine setup (`manage.py up` with no REDIS_URL: its own redis-server): only
# there does this site serve its demo JSON and may http_export fetch it. Any deployment that names
# its Redis is not a demo unless DEMO_SETUP=true says so.
DEMO_SETUP = env_bool("DEMO_SETUP", not env_str("REDIS_URL"))
# http_export's outbound policy (reports/kinds/outbound.py): only `host` (its scheme's default port) or
# `host:port` entries; an address that is not public (loopback, private, link-local, metadata) is
# fetched only when the allowlist names that address itself. Empty outside the demo setup.
_DEMO_SOURCE = "127.0.0.1:8000"
HTTP_EXPORT_URL = env_str("HTTP_EXPORT_URL",
                          f"http://{_DEMO_SOURCE}/report/demo/orders.json" if DEMO_SETUP else "")
HTTP_EXPORT_ALLOWED_HOSTS = env_list("HTTP_EXPORT_ALLOWED_HOSTS", _DEMO_SOURCE if DEMO_SETUP else "")
# Constants (not read from the environment): seconds to connect and for each read, seconds for the
# whole fetch, and the largest body fetched.
HTTP_EXPORT_TIMEOUT = 10.0
HTTP_EXPORT_DEADLINE = 30.0
HTTP_EXPORT_MAX_BYTES = 10 * 1024 * 1024

# --- Dead letters -------------------------------------------------------------
DEADLETTER_RETENTION_DAYS = env_int("DEADLETTER_RETENTION_DAYS", 7, minimum=1)
# Days kept before the housekeeper (and `manage.py prune_data`) deletes, as "what=days,...": done and
# cancelled tasks with their attempts and report files (tasks), sent alert messages (alerts), audit
# entries (audit); 0 keeps that kind forever.
RETENTION_DAYS = {"tasks": 30, "alerts": 90, "audit": 400} | env_kind_map("RETENTION_DAYS", minimum=0)
if not set(RETENTION_DAYS) <= {"tasks", "alerts", "audit"}:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        f"RETENTION_DAYS names only tasks, alerts and audit, got {sorted(RETENTION_DAYS)}")
# Replay, archive and discard (one letter, a bulk, the API) refuse to act without a reason.
DEADLETTER_REQUIRE_REASON = env_bool("DEADLETTER_REQUIRE_REASON", False)
CONSOLE_BASE_URL = env_str("CONSOLE_BASE_URL", "http://127.0.0.1:8000").rstrip("/")

# --- Files --------------------------------------------------------------------
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
MEDIA_URL = "/media/"
ARCHIVE_DIR = Path(env_str("ARCHIVE_DIR", str(VAR_DIR / "archive")))
# Report outputs ("default") and purge exports ("archive") go through Django's storage API: the
# local disk by default; an S3-compatible bucket (django-storages) when workers and web run on
# several machines. Objects stay private: downloads stream through the permission-checked views.
REPORT_STORAGE = env_str("REPORT_STORAGE", "filesystem").strip().lower()
AWS_STORAGE_BUCKET_NAME = env_str("AWS_STORAGE_BUCKET_NAME", "")
AWS_S3_ENDPOINT_URL = env_str("AWS_S3_ENDPOINT_URL", "") or None
AWS_S3_REGION_NAME = env_str("AWS_S3_REGION_NAME", "") or None
AWS_ACCESS_KEY_ID = env_str("AWS_ACCESS_KEY_ID", "") or None  # None: boto3's own credential chain
AWS_SECRET_ACCESS_KEY = env_str("AWS_SECRET_ACCESS_KEY", "") or None
AWS_S3_ADDRESSING_STYLE = env_str("AWS_S3_ADDRESSING_STYLE", "path")
AWS_LOCATION = env_str("AWS_LOCATION", "").strip("/")  # a key prefix inside the bucket
AWS_DEFAULT_ACL = None
AWS_QUERYSTRING_AUTH = True
STORAGES = storages_setting(
    REPORT_STORAGE, archive_dir=ARCHIVE_DIR, bucket=AWS_STORAGE_BUCKET_NAME, location=AWS_LOCATION
)
STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
WHITENOISE_USE_FINDERS = True  # serve static/ without collectstatic in the default setup

# --- Auth: login throttle, sessions, HTTPS (config/settings_auth.py) ----------
from config.settings_auth import *  # noqa: E402,F403

# English and Simplified Chinese; LANGUAGE_CODE serves browsers asking for neither, the API and commands.
LANGUAGE_CODE = env_choice("LANGUAGE_CODE", "en", choices=[code for code, _ in LANGUAGES])
LOCALE_PATHS = [BASE_DIR / "locale"]
# A year: the switch's choice outlives the session; a signed-in operator's choice is also stored.
LANGUAGE_COOKIE_AGE = 365 * 24 * 3600
LANGUAGE_COOKIE_SECURE = SESSION_COOKIE_SECURE  # noqa: F405 - config.settings_auth
USE_I18N = True
USE_TZ = True

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
# plain, or json: one JSON object a line with the task, attempt, kind, letter and fingerprint ids.
LOG_FORMAT = env_str("LOG_FORMAT", "plain").strip().lower()
LOGGING = logging_config(level=LOG_LEVEL, json_lines=LOG_FORMAT == "json")
# Sends errors (a failing attempt: one event with its ids) to Sentry; traces follow OpenTelemetry's
# own OTEL_EXPORTER_OTLP_ENDPOINT (config/observability.py).
SENTRY_DSN = env_str("SENTRY_DSN")

# --- Alerts: DingTalk and the other channels (config/settings_alerts.py) -----
from config.settings_alerts import *  # noqa: E402,F403

sentry_init(SENTRY_DSN, release=RELEASE_NAME)  # noqa: F405 - config.settings_alerts
tracing_init()

# --- JSON API -----------------------------------------------------------------
# The largest JSON body of an API request but a batch's (constant, not read from the environment).
API_MAX_BODY_BYTES = 256 * 1024
# Tasks each API token (or console user calling the API) may submit (a batch of N counts N):
# (N, period seconds), or None for "off". A full period's budget may be spent at once; past it, a
# submit waits (429, Retry-After).
API_SUBMIT_RATE = env_rate("API_SUBMIT_RATE", "600/minute")
# Replays each API token (or console user calling the API) may ask for, the same way: a replay that
# dies again alerts again, so a client looping replay -> death -> alert is stopped here.
API_REPLAY_RATE = env_rate("API_REPLAY_RATE", "60/hour")

# --- Console ------------------------------------------------------------------
# Constants (not read from the environment): the dashboard's table-wide aggregates are shared
# between polls this many seconds (0 = live); rows per console page.
CONSOLE_DASHBOARD_CACHE_SECONDS = 10
CONSOLE_PAGE_SIZE = 50
# The client address (audit log, login throttle) is REMOTE_ADDR; behind N reverse proxies,
# CONSOLE_TRUSTED_PROXY_COUNT=N takes the one they appended to X-Forwarded-For (never the client's
# left end), and only when the direct peer is in CONSOLE_TRUSTED_PROXIES (addresses or networks).
CONSOLE_TRUSTED_PROXIES = env_networks("CONSOLE_TRUSTED_PROXIES", "127.0.0.1,::1")
CONSOLE_TRUSTED_PROXY_COUNT = env_int("CONSOLE_TRUSTED_PROXY_COUNT", 0, minimum=0)
# Bulk actions, constants (not read from the environment; a run's rate and its watch's threshold are
# chosen per run): the default throttle (letters per second) and its max, letters per transaction,
# and the replay watch: pause when more than THRESHOLD of the replayed tasks that finished died
# again, once at least MIN_SAMPLE have finished.
BULK_ACTION_RATE_PER_SECOND = 200.0
BULK_ACTION_MAX_RATE = 2000.0
BULK_ACTION_BATCH_SIZE = 500
BULK_REPLAY_PAUSE_THRESHOLD = 0.5
BULK_REPLAY_PAUSE_MIN_SAMPLE = 20
# One job runs a bulk for at most SLICE seconds, then re-enqueues itself to carry on; it holds the
# bulk's lock LOCK seconds at a time; the housekeeper re-enqueues a pending/running bulk silent for
# STALE seconds.
BULK_ACTION_SLICE_SECONDS = 60
BULK_ACTION_LOCK_SECONDS = 30
BULK_ACTION_STALE_SECONDS = 120
# Canary replays (constants): the share of the first replays that must succeed by default, the most
# a canary may hold, and how long its outcome is awaited; scheduled runs start at most this many days
# ahead (the housekeeper starts them within a second of their time).
BULK_CANARY_SUCCESS = 0.8
BULK_CANARY_MAX = 1000
BULK_CANARY_WAIT_SECONDS = 900
BULK_SCHEDULE_MAX_DAYS = 30
# GET /metrics: addresses (or networks) that may scrape without a token; constants: the open-letter
# causes shown by name (the rest add up as "other"), the window of the attempt histograms.
METRICS_ALLOWED_ADDRESSES = env_list("METRICS_ALLOWED_ADDRESSES", "")
METRICS_TOP_CAUSES = 10
METRICS_WINDOW_SECONDS = 600

# --- Batches, priorities, paused kinds ----------------------------------------
# Per-kind default queue, overriding each kind's default_priority ("http_export=low").
REPORT_KIND_PRIORITIES = env_kind_map("REPORT_KIND_PRIORITIES", choices=REPORT_QUEUES)
# At most N running tasks of a kind across all workers ("probe=2,http_export=4").
REPORT_KIND_CONCURRENCY = env_kind_map("REPORT_KIND_CONCURRENCY", minimum=1)
# Every other kind's cap, so no client's flood of one kind takes every worker; 0 = uncapped.
REPORT_KIND_DEFAULT_CONCURRENCY = env_int("REPORT_KIND_DEFAULT_CONCURRENCY", 4, minimum=0)
REPORT_BATCH_MAX_ITEMS = env_int("REPORT_BATCH_MAX_ITEMS", 10_000, minimum=1)
# Constants (not read from the environment): larger batches are enqueued by one job on the high
# queue rather than inside the request; batch submit bodies are larger than single submits (10,000
# small items are about 1 MiB), and Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB) still bounds it.
REPORT_BATCH_INLINE_ENQUEUE_MAX = 1000
REPORT_BATCH_MAX_BODY_BYTES = 2 * 1024 * 1024
