"""Settings read from environment variables; every default is safe for a laptop.

Production sets at least SECRET_KEY, DATABASE_URL, REDIS_URL, ALLOWED_HOSTS and
CONSOLE_BASE_URL. The README lists every variable.
"""

import os
import secrets
from pathlib import Path

import dj_database_url

from config.env import env_bool, env_float, env_float_list, env_int, env_list, env_str
from config.storage import storages_setting

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    configured = env_str("SECRET_KEY")
    if configured:
        return configured
    # A per-checkout random key: never a well-known default, stable across restarts.
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", False)
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
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
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
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 0))}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web, workers and the reaper write from separate processes: WAL lets readers
    # run beside a writer, IMMEDIATE takes the write lock up front so two writers
    # queue on the busy timeout instead of failing with "database is locked".
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
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

# --- Redis and RQ -------------------------------------------------------------
# Unset REDIS_URL means the embedded redis-server that `manage.py up` starts on
# a unix socket under var/; production points this at a real Redis.
EMBEDDED_REDIS_SOCKET = VAR_DIR / "redis.sock"
REDIS_URL = env_str("REDIS_URL", f"unix://{EMBEDDED_REDIS_SOCKET}?db=0")
REPORT_QUEUES = ("high", "default", "low")
# Jobs carry only integers, so they are JSON: unpickling what sits in Redis would run whatever
# code anyone able to write there put in it. reports.queueing.JobSerializer also reads the
# pickled jobs of earlier releases, while RQ_ACCEPT_PICKLED_JOBS is on (README, "Upgrading").
JOB_SERIALIZER = "reports.queueing.JobSerializer"
RQ_ACCEPT_PICKLED_JOBS = env_bool("RQ_ACCEPT_PICKLED_JOBS", False)
RQ_QUEUES = {
    name: {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 360, "SERIALIZER": JOB_SERIALIZER} for name in REPORT_QUEUES
}
# rqworker (and `manage.py up`) start our worker class unless --worker-class says otherwise: the
# worker process claims each attempt, heartbeats its lease and records its outcome.
RQ = {"COMMIT_MODE": "auto", "WORKER_CLASS": "reports.worker.ReportWorker"}  # we enqueue on commit ourselves
RQ_SHOW_ADMIN_LINK = False

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
REPORT_PARAMS_MAX_BYTES = env_int("REPORT_PARAMS_MAX_BYTES", 64 * 1024, minimum=1)
# How long a pending/retrying task may sit past its due time with no RQ job
# before the reaper enqueues it again.
REPORT_REENQUEUE_AFTER = env_int("REPORT_REENQUEUE_AFTER", 30, minimum=0)
# A pass is a few indexed queries; a worker killed whole is recovered within the lease + this.
REAPER_INTERVAL = env_int("REAPER_INTERVAL", 5, minimum=1)
RQ_RESULT_TTL = env_int("RQ_RESULT_TTL", 600, minimum=0)
RQ_FAILURE_TTL = env_int("RQ_FAILURE_TTL", 7 * 24 * 3600, minimum=0)

HTTP_EXPORT_URL = env_str("HTTP_EXPORT_URL", "http://127.0.0.1:8000/report/demo/orders.json")
HTTP_EXPORT_ALLOWED_HOSTS = env_list("HTTP_EXPORT_ALLOWED_HOSTS", "127.0.0.1,localhost")
HTTP_EXPORT_TIMEOUT = env_float("HTTP_EXPORT_TIMEOUT", 10.0, minimum=0.1)

# --- Dead letters -------------------------------------------------------------
DEADLETTER_RETENTION_DAYS = env_int("DEADLETTER_RETENTION_DAYS", 7, minimum=1)
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

# --- Auth ---------------------------------------------------------------------
LOGIN_URL = "/console/login/"
LOGIN_REDIRECT_URL = "/console/"
LOGOUT_REDIRECT_URL = "/console/login/"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(process)d %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "reports": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": True},
        "deadletters": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": True},
        "console": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": True},
        "api": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": True},
    },
}

# --- Alerts (DingTalk) --------------------------------------------------------
# Unset DINGTALK_WEBHOOK: alerts are recorded as "skipped" and nothing is sent.
# The webhook URL carries the robot's access_token and is never logged or stored.
DINGTALK_WEBHOOK = env_str("DINGTALK_WEBHOOK", "").strip()
DINGTALK_SECRET = env_str("DINGTALK_SECRET", "").strip()  # "加签" secret (SEC...), optional
DINGTALK_KEYWORD = env_str("DINGTALK_KEYWORD", "").strip()  # "自定义关键词", optional
DINGTALK_AT_MOBILES = env_list("DINGTALK_AT_MOBILES", "")
DINGTALK_RATE_PER_MINUTE = env_int("DINGTALK_RATE_PER_MINUTE", 20, minimum=1)
DINGTALK_TIMEOUT = env_float("DINGTALK_TIMEOUT", 5.0, minimum=0.1)
DINGTALK_MAX_SEND_ATTEMPTS = env_int("DINGTALK_MAX_SEND_ATTEMPTS", 10, minimum=1)
DINGTALK_RETRY_BACKOFF = env_float_list("DINGTALK_RETRY_BACKOFF", "10,30,60,120,300,600")
DINGTALK_THROTTLE_BACKOFF_SECONDS = env_int("DINGTALK_THROTTLE_BACKOFF_SECONDS", 600, minimum=1)
DINGTALK_CONFIG_ERROR_PAUSE_SECONDS = env_int("DINGTALK_CONFIG_ERROR_PAUSE_SECONDS", 600, minimum=1)
DINGTALK_WRAP_LINKS = env_bool("DINGTALK_WRAP_LINKS", False)
DINGTALK_DIGEST_MAX_GROUPS = env_int("DINGTALK_DIGEST_MAX_GROUPS", 10, minimum=1)
ALERTS_SEND_INTERVAL = env_float("ALERTS_SEND_INTERVAL", 5.0, minimum=0.1)

# --- JSON API -----------------------------------------------------------------
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 256 * 1024, minimum=1024)
API_DEADLETTER_PAGE_SIZE = env_int("API_DEADLETTER_PAGE_SIZE", 50, minimum=1)
API_DEADLETTER_PAGE_MAX = env_int("API_DEADLETTER_PAGE_MAX", 200, minimum=1)
# last_used_at of an API token is written at most this often (seconds), not on every request.
API_TOKEN_TOUCH_SECONDS = env_int("API_TOKEN_TOUCH_SECONDS", 60, minimum=0)

# --- Console ------------------------------------------------------------------
# Table-wide aggregates shared between dashboard polls / filter drop-downs (seconds; 0 = live).
CONSOLE_DASHBOARD_CACHE_SECONDS = env_int("CONSOLE_DASHBOARD_CACHE_SECONDS", 10, minimum=0)
CONSOLE_FILTER_CHOICES_CACHE_SECONDS = env_int("CONSOLE_FILTER_CHOICES_CACHE_SECONDS", 300, minimum=0)
# Console actions (part B). The audit log records REMOTE_ADDR; behind N trusted reverse
# proxies set CONSOLE_TRUSTED_PROXY_COUNT=N to take the client address they appended to
# X-Forwarded-For (never the client-supplied left end).
CONSOLE_TRUSTED_PROXY_COUNT = env_int("CONSOLE_TRUSTED_PROXY_COUNT", 0, minimum=0)
# Bulk actions: default throttle (letters per second, changeable per run up to the max),
# letters per transaction, and the replay watch: pause when more than THRESHOLD of the
# replayed tasks that finished died again, once at least MIN_SAMPLE have finished.
BULK_ACTION_RATE_PER_SECOND = env_float("BULK_ACTION_RATE_PER_SECOND", 200.0, minimum=0.1)
BULK_ACTION_MAX_RATE = env_float("BULK_ACTION_MAX_RATE", 2000.0, minimum=0.1)
BULK_ACTION_BATCH_SIZE = env_int("BULK_ACTION_BATCH_SIZE", 500, minimum=1)
BULK_REPLAY_PAUSE_THRESHOLD = env_float("BULK_REPLAY_PAUSE_THRESHOLD", 0.5, minimum=0)
BULK_REPLAY_PAUSE_MIN_SAMPLE = env_int("BULK_REPLAY_PAUSE_MIN_SAMPLE", 20, minimum=1)
# Ticked rows per bulk action; Django refuses forms of more than 1,000 fields anyway.
BULK_SELECTION_MAX = env_int("BULK_SELECTION_MAX", 1000, minimum=1)
# One job runs a bulk for at most this long, then re-enqueues itself to carry on.
BULK_ACTION_SLICE_SECONDS = env_int("BULK_ACTION_SLICE_SECONDS", 60, minimum=1)
BULK_ACTION_LOCK_SECONDS = env_int("BULK_ACTION_LOCK_SECONDS", 30, minimum=15)
# `manage.py resume_bulk_actions` re-enqueues a pending/running bulk silent for this long.
BULK_ACTION_STALE_SECONDS = env_int("BULK_ACTION_STALE_SECONDS", 120, minimum=30)
CONSOLE_PAGE_SIZE = env_int("CONSOLE_PAGE_SIZE", 50, minimum=1)
# Tracebacks longer than this are cut on the detail page (the full text is one click away).
CONSOLE_TRACEBACK_DISPLAY_CHARS = env_int("CONSOLE_TRACEBACK_DISPLAY_CHARS", 200_000, minimum=1000)

# --- Batches, priorities, paused kinds ----------------------------------------
def _kind_map(name: str, cast) -> dict:
    """"kind=value,kind=value" from the environment; a malformed entry fails start-up with its name."""
    from django.core.exceptions import ImproperlyConfigured

    result = {}
    for part in env_list(name, ""):
        kind, sep, value = part.partition("=")
        try:
            if not sep or not kind.strip():
                raise ValueError
            result[kind.strip()] = cast(value.strip())
        except ValueError:
            raise ImproperlyConfigured(f"{name} must look like 'kind=value,kind=value', got {part!r}") from None
    return result


def _priority(value: str) -> str:
    if value not in REPORT_QUEUES:
        raise ValueError(value)
    return value


def _positive_int(value: str) -> int:
    if int(value) < 1:
        raise ValueError(value)
    return int(value)


# Per-kind default queue, overriding each kind's default_priority ("http_export=low").
REPORT_KIND_PRIORITIES = _kind_map("REPORT_KIND_PRIORITIES", _priority)
# At most N running tasks of a kind across all workers ("probe=2,http_export=4"); unset = no cap.
REPORT_KIND_CONCURRENCY = _kind_map("REPORT_KIND_CONCURRENCY", _positive_int)
REPORT_BATCH_MAX_ITEMS = env_int("REPORT_BATCH_MAX_ITEMS", 10_000, minimum=1)
# Larger batches are enqueued by one job on the high queue rather than inside the request.
REPORT_BATCH_INLINE_ENQUEUE_MAX = env_int("REPORT_BATCH_INLINE_ENQUEUE_MAX", 1000, minimum=0)
# Batch submit bodies are larger than single submits (10,000 small items are about 1 MiB); Django's
# DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB) still bounds every body.
REPORT_BATCH_MAX_BODY_BYTES = env_int("REPORT_BATCH_MAX_BODY_BYTES", 2 * 1024 * 1024, minimum=1024)
