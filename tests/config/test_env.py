"""A blank environment variable means "use the default", for every setting we read."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config import env

BASE_DIR = Path(__file__).resolve().parents[2]
# Every variable config/settings.py reads through config.env.
SETTING_NAMES = sorted(
    set(re.findall(r'env_\w+\(\s*"([A-Z0-9_]+)"', (BASE_DIR / "config" / "settings.py").read_text()))
)
PROBE = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps({name: repr(getattr(settings, name, None)) for name in %r} | {"DB": repr(settings.DATABASES["default"]["ENGINE"])}))
"""


def _settings_with(env_overrides: dict, tmp_path) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in SETTING_NAMES}
    environ.update(DJANGO_SETTINGS_MODULE="config.settings", VAR_DIR=str(tmp_path), **env_overrides)
    result = subprocess.run(
        [sys.executable, "-c", PROBE % (SETTING_NAMES,)],
        cwd=BASE_DIR,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_settings_module_reads_many_variables():
    assert {"DATABASE_URL", "REDIS_URL", "REPORT_MAX_ATTEMPTS", "ALLOWED_HOSTS"} <= set(SETTING_NAMES)
    assert {
        "DEMO_SETUP",
        "HTTP_EXPORT_URL",
        "HTTP_EXPORT_ALLOWED_HOSTS",
        "HTTP_EXPORT_TIMEOUT",
        "HTTP_EXPORT_DEADLINE",
        "HTTP_EXPORT_MAX_BYTES",
        "REPORT_KIND_DEFAULT_CONCURRENCY",
    } <= set(SETTING_NAMES)


def test_every_blank_variable_gives_the_same_settings_as_an_unset_one(tmp_path):
    unset = _settings_with({}, tmp_path)
    blank = _settings_with({name: "" for name in SETTING_NAMES if name != "VAR_DIR"}, tmp_path)
    spaces = _settings_with({"DATABASE_URL": "  ", "ALLOWED_HOSTS": " ", "REPORT_MAX_ATTEMPTS": " "}, tmp_path)
    assert blank == unset
    assert spaces == unset
    assert unset["DB"] == "'django.db.backends.sqlite3'"


@pytest.mark.parametrize(
    ("reader", "default"),
    [
        (lambda: env.env_str("X_TEST_VAR", "d"), "d"),
        (lambda: env.env_int("X_TEST_VAR", 7), 7),
        (lambda: env.env_float("X_TEST_VAR", 0.5), 0.5),
        (lambda: env.env_bool("X_TEST_VAR", True), True),
        (lambda: env.env_list("X_TEST_VAR", "a,b"), ["a", "b"]),
        (lambda: env.env_float_list("X_TEST_VAR", "1,2"), (1.0, 2.0)),
        (lambda: env.env_rate("X_TEST_VAR", "600/minute"), (600, 60)),
    ],
)
def test_each_reader_treats_blank_as_unset(monkeypatch, reader, default):
    monkeypatch.setenv("X_TEST_VAR", "")
    assert reader() == default
    monkeypatch.setenv("X_TEST_VAR", "   ")
    assert reader() == default


def test_security_settings_are_read_from_the_environment(tmp_path):
    """Issue 11: the login throttle and the HTTPS settings (the README's production checklist)."""
    names = {
        "AXES_FAILURE_LIMIT": ("3", "3"),
        "AXES_COOLOFF_MINUTES": ("30", None),
        "SECURE_SSL_REDIRECT": ("true", "True"),
        "SECURE_HSTS_SECONDS": ("600", "600"),
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": ("true", "True"),
        "SECURE_HSTS_PRELOAD": ("true", "True"),
        "SECURE_PROXY_SSL_HEADER": ("X-Forwarded-Proto=https", "('HTTP_X_FORWARDED_PROTO', 'https')"),
        "CSRF_COOKIE_SECURE": ("true", "True"),
    }
    assert set(names) <= set(SETTING_NAMES)
    read = _settings_with({name: raw for name, (raw, _) in names.items()}, tmp_path)
    for name, (_, expected) in names.items():
        if expected is not None:
            assert read[name] == expected, name
    defaults = _settings_with({}, tmp_path)
    assert (defaults["AXES_FAILURE_LIMIT"], defaults["SECURE_SSL_REDIRECT"], defaults["SECURE_PROXY_SSL_HEADER"]) == (
        "5",
        "False",
        "None",
    )


def test_naming_a_redis_ends_the_demo_setup_and_its_outbound_allowlist(tmp_path):
    embedded = _settings_with({}, tmp_path)
    deployed = _settings_with({"REDIS_URL": "redis://redis.internal:6379/0"}, tmp_path)
    forced = _settings_with({"REDIS_URL": "redis://redis.internal:6379/0", "DEMO_SETUP": "true"}, tmp_path)
    assert (embedded["DEMO_SETUP"], deployed["DEMO_SETUP"], forced["DEMO_SETUP"]) == ("True", "False", "True")
    assert embedded["HTTP_EXPORT_ALLOWED_HOSTS"] == "['127.0.0.1:8000']"
    assert embedded["HTTP_EXPORT_URL"] == "'http://127.0.0.1:8000/report/demo/orders.json'"
    assert deployed["HTTP_EXPORT_ALLOWED_HOSTS"] == "[]"
    assert deployed["HTTP_EXPORT_URL"] == "''"


# Every variable config/gunicorn_conf.py (the production web server's settings) reads.
WEB_SERVER_NAMES = sorted(
    set(re.findall(r'env_\w+\(\s*"([A-Z_]+)"', (BASE_DIR / "config" / "gunicorn_conf.py").read_text()))
)
WEB_PROBE = """
import json
import config.gunicorn_conf as conf
print(json.dumps({name: repr(value) for name, value in vars(conf).items() if not name.startswith("_")
                  and isinstance(value, (str, int, float, list, type(None)))}))
"""


def test_every_blank_web_server_variable_gives_the_gunicorn_defaults(tmp_path):
    assert {"WEB_BIND", "WEB_WORKERS", "WEB_TIMEOUT"} <= set(WEB_SERVER_NAMES)

    def conf_with(overrides: dict) -> dict:
        environ = {k: v for k, v in os.environ.items() if k not in WEB_SERVER_NAMES}
        environ.update(overrides)
        result = subprocess.run(
            [sys.executable, "-c", WEB_PROBE], cwd=BASE_DIR, env=environ, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads(result.stdout.strip().splitlines()[-1])

    unset = conf_with({})
    assert conf_with({name: "" for name in WEB_SERVER_NAMES}) == unset
    assert unset["bind"] == "['127.0.0.1:8000']" and unset["timeout"] == "60"


STORAGE_PROBE = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps({"STORAGES": {k: v["BACKEND"] for k, v in settings.STORAGES.items()},
                  "ARCHIVE": str(settings.STORAGES["archive"].get("OPTIONS"))}))
"""


def _storages_with(env_overrides: dict, tmp_path) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in SETTING_NAMES}
    environ.update(DJANGO_SETTINGS_MODULE="config.settings", VAR_DIR=str(tmp_path), **env_overrides)
    return subprocess.run(
        [sys.executable, "-c", STORAGE_PROBE], cwd=BASE_DIR, env=environ, capture_output=True, text=True, timeout=60
    )


def test_report_storage_is_the_local_disk_by_default_and_s3_when_asked(tmp_path):
    assert {"REPORT_STORAGE", "AWS_STORAGE_BUCKET_NAME", "AWS_S3_ENDPOINT_URL", "AWS_SECRET_ACCESS_KEY"} <= set(
        SETTING_NAMES
    )
    default = json.loads(_storages_with({}, tmp_path).stdout.splitlines()[-1])
    assert default["STORAGES"]["default"] == default["STORAGES"]["archive"] == (
        "django.core.files.storage.FileSystemStorage"
    )
    s3 = _storages_with(
        {"REPORT_STORAGE": "s3", "AWS_STORAGE_BUCKET_NAME": "b", "AWS_LOCATION": "/prod/"}, tmp_path
    )
    s3_storages = json.loads(s3.stdout.splitlines()[-1])
    assert s3_storages["STORAGES"]["default"] == s3_storages["STORAGES"]["archive"] == "storages.backends.s3.S3Storage"
    assert s3_storages["ARCHIVE"] == "{'location': 'prod/archive'}"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"REPORT_STORAGE": "s3"}, "REPORT_STORAGE=s3 needs AWS_STORAGE_BUCKET_NAME"),
        ({"REPORT_STORAGE": "ftp"}, "REPORT_STORAGE must be filesystem or s3, got 'ftp'"),
    ],
)
def test_a_bad_report_storage_fails_at_start_up_with_its_name(tmp_path, overrides, message):
    result = _storages_with({**overrides, "AWS_SECRET_ACCESS_KEY": "do-not-print-me"}, tmp_path)
    assert result.returncode != 0 and message in result.stderr
    assert "do-not-print-me" not in result.stderr


def test_a_kind_map_reads_kind_value_pairs_and_names_a_bad_entry(monkeypatch):
    monkeypatch.setenv("X_KIND_MAP", "probe=2, http_export = 4")
    assert env.env_kind_map("X_KIND_MAP", minimum=1) == {"probe": 2, "http_export": 4}
    monkeypatch.setenv("X_KIND_MAP", "probe=low")
    assert env.env_kind_map("X_KIND_MAP", choices=("high", "default", "low")) == {"probe": "low"}
    for bad, options in [("probe=0", {"minimum": 1}), ("probe", {"minimum": 1}), ("=3", {}), ("probe=urgent", {"choices": ("low",)})]:
        monkeypatch.setenv("X_KIND_MAP", bad)
        with pytest.raises(ImproperlyConfigured, match=f"X_KIND_MAP must look like .*{re.escape(repr(bad))}"):
            env.env_kind_map("X_KIND_MAP", **options)


def test_metrics_settings_are_read_from_the_environment(tmp_path):
    names = ("METRICS_ALLOWED_ADDRESSES", "METRICS_TOP_CAUSES", "METRICS_WINDOW_SECONDS")
    read = _settings_with(dict(zip(names, ("10.0.0.0/8, 192.0.2.7", "5", "300"), strict=True)), tmp_path)
    assert read["METRICS_ALLOWED_ADDRESSES"] == "['10.0.0.0/8', '192.0.2.7']"
    assert (read["METRICS_TOP_CAUSES"], read["METRICS_WINDOW_SECONDS"]) == ("5", "300")
    defaults = _settings_with({}, tmp_path)
    assert tuple(defaults[name] for name in names) == ("[]", "10", "600")
