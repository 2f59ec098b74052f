"""Settings read from environment variables; every default is safe for a laptop.

Production sets at least SECRET_KEY, DATABASE_URL, REDIS_URL, ALLOWED_HOSTS and
CONSOLE_BASE_URL. The README lists every variable.
"""

import os
import secrets
from pathlib import Path

import dj_database_url

from config.env import env_bool, env_float, env_float_list, env_int, env_list, env_str

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
    "reports",
    "deadletters",
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
    "django_htmx.middleware.HtmxMiddleware",
]

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
    DATABASES["default"].setdefault("TEST", {})
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis and RQ -------------------------------------------------------------
# Unset REDIS_URL means the embedded redis-server that `manage.py up` starts on
# a unix socket under var/; production points this at a real Redis.
EMBEDDED_REDIS_SOCKET = VAR_DIR / "redis.sock"
REDIS_URL = env_str("REDIS_URL", f"unix://{EMBEDDED_REDIS_SOCKET}?db=0")
REPORT_QUEUES = ("high", "default", "low")
RQ_QUEUES = {name: {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 360} for name in REPORT_QUEUES}
RQ = {"COMMIT_MODE": "auto"}  # we enqueue from transaction.on_commit ourselves
RQ_SHOW_ADMIN_LINK = False

# --- Report tasks -------------------------------------------------------------
REPORT_MAX_ATTEMPTS = env_int("REPORT_MAX_ATTEMPTS", 3, minimum=1)
REPORT_RETRY_BACKOFF = env_float_list("REPORT_RETRY_BACKOFF", "10,30,60")
REPORT_RETRY_JITTER = env_float("REPORT_RETRY_JITTER", 0.2, minimum=0)
REPORT_JOB_TIMEOUT = env_int("REPORT_JOB_TIMEOUT", 300, minimum=1)
REPORT_LEASE_GRACE = env_int("REPORT_LEASE_GRACE", 30, minimum=0)
REPORT_PARAMS_MAX_BYTES = env_int("REPORT_PARAMS_MAX_BYTES", 64 * 1024, minimum=1)
# How long a pending/retrying task may sit past its due time with no RQ job
# before the reaper enqueues it again.
REPORT_REENQUEUE_AFTER = env_int("REPORT_REENQUEUE_AFTER", 30, minimum=0)
REAPER_INTERVAL = env_int("REAPER_INTERVAL", 15, minimum=1)
RQ_RESULT_TTL = env_int("RQ_RESULT_TTL", 600, minimum=0)
RQ_FAILURE_TTL = env_int("RQ_FAILURE_TTL", 7 * 24 * 3600, minimum=0)

HTTP_EXPORT_URL = env_str("HTTP_EXPORT_URL", "http://127.0.0.1:8000/report/demo/orders.json")
HTTP_EXPORT_ALLOWED_HOSTS = env_list("HTTP_EXPORT_ALLOWED_HOSTS", "127.0.0.1,localhost")
HTTP_EXPORT_TIMEOUT = env_float("HTTP_EXPORT_TIMEOUT", 10.0, minimum=0.1)

# --- Dead letters -------------------------------------------------------------
DEADLETTER_RETENTION_DAYS = env_int("DEADLETTER_RETENTION_DAYS", 7, minimum=1)
CONSOLE_BASE_URL = env_str("CONSOLE_BASE_URL", "http://127.0.0.1:8000").rstrip("/")

# --- Files --------------------------------------------------------------------
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
MEDIA_URL = "/media/"
ARCHIVE_DIR = Path(env_str("ARCHIVE_DIR", str(VAR_DIR / "archive")))
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
    },
}

# --- Alerts (DingTalk) --------------------------------------------------------

# --- JSON API -----------------------------------------------------------------

# --- Console ------------------------------------------------------------------

# --- Batches, priorities, paused kinds ----------------------------------------
