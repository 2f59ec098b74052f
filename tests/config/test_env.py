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
# Every variable config/settings.py (and the parts it imports, config/settings_*.py) reads through config.env.
SETTING_NAMES = sorted(
    {
        name
        for path in sorted((BASE_DIR / "config").glob("settings*.py"))
        for name in re.findall(r'env_\w+\(\s*"([A-Z0-9_]+)"', path.read_text())
    }
)
PROBE = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps({name: repr(getattr(settings, name, None)) for name in %r}
                 | {"DB": repr(settings.DATABASES["default"]["ENGINE"])}))
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
        "REPORT_KIND_DEFAULT_CONCURRENCY",
    } <= set(SETTING_NAMES)


def test_every_blank_variable_gives_the_same_settings_as_an_unset_one(tmp_path):
    unset = _settings_with({}, tmp_path)
    blank = _settings_with({name: "" for name in SETTING_NAMES if name != "VAR_DIR"}, tmp_path)
    spaces = _settings_with({"DATABASE_URL": "  ", "ALLOWED_HOSTS": " ", "REPORT_MAX_ATTEMPTS": " "},
                            tmp_path)
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
        "AXES_ADDRESS_FAILURE_LIMIT": ("50", "50"),
        "SESSION_IDLE_TIMEOUT": ("1800", "1800"),
        "SESSION_ABSOLUTE_TIMEOUT": ("43200", "43200"),
        "CONSOLE_TRUSTED_PROXIES": (
            "10.0.0.0/8, 192.0.2.7", "(IPv4Network('10.0.0.0/8'), IPv4Network('192.0.2.7/32'))"),
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
    assert (defaults["AXES_FAILURE_LIMIT"], defaults["SECURE_SSL_REDIRECT"],
            defaults["SECURE_PROXY_SSL_HEADER"]) == ("5", "False", "None")
    assert defaults["AXES_ADDRESS_FAILURE_LIMIT"] == "20"
    assert (defaults["SESSION_IDLE_TIMEOUT"], defaults["SESSION_ABSOLUTE_TIMEOUT"]) == ("28800", "86400")
    assert defaults["CONSOLE_TRUSTED_PROXIES"] == "(IPv4Network('127.0.0.1/32'), IPv6Network('::1/128'))"


def test_a_trusted_proxy_that_is_not_an_address_fails_start_up(monkeypatch):
    monkeypatch.setenv("X_TEST_VAR", "10.0.0.0/8, proxy.internal")
    with pytest.raises(ImproperlyConfigured, match="X_TEST_VAR must list IP addresses or networks"):
        env.env_networks("X_TEST_VAR", "")


def test_naming_a_redis_ends_the_demo_setup_and_its_outbound_allowlist(tmp_path):
    embedded = _settings_with({}, tmp_path)
    deployed = _settings_with({"REDIS_URL": "redis://redis.internal:6379/0"}, tmp_path)
    forced = _settings_with({"REDIS_URL": "redis://redis.internal:6379/0", "DEMO_SETUP": "true"}, tmp_path)
    assert (embedded["DEMO_SETUP"], deployed["DEMO_SETUP"], forced["DEMO_SETUP"]) == ("True", "False", "True")
    assert embedded["HTTP_EXPORT_ALLOWED_HOSTS"] == "['127.0.0.1:8000']"
    assert embedded["HTTP_EXPORT_URL"] == "'http://127.0.0.1:8000/report/demo/orders.json'"
    assert deployed["HTTP_EXPORT_ALLOWED_HOSTS"] == "[]"
    assert deployed["HTTP_EXPORT_URL"] == "''"


WEB_PROBE = """
import json
import config.gunicorn_conf as conf
print(json.dumps({name: repr(value) for name, value in vars(conf).items() if not name.startswith("_")
                  and isinstance(value, (str, int, float, list, type(None)))}))
"""


def test_the_web_server_defaults_read_no_web_variable():
    """gunicorn's flags override them (tests/system/test_gunicorn.py binds with --bind)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("WEB_", "GUNICORN_"))}
    result = subprocess.run(
        [sys.executable, "-c", WEB_PROBE], cwd=BASE_DIR, env=environ, capture_output=True, text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    conf = json.loads(result.stdout.strip().splitlines()[-1])
    assert conf["bind"] == "['127.0.0.1:8000']" and conf["timeout"] == "60"
    assert conf["forwarded_allow_ips"] == "'127.0.0.1,::1'"
    assert conf["control_socket_disable"] == "True"



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
        [sys.executable, "-c", STORAGE_PROBE], cwd=BASE_DIR, env=environ, capture_output=True, text=True,
        timeout=60
    )


def test_report_storage_is_the_local_disk_by_default_and_s3_when_asked(tmp_path):
    assert {"REPORT_STORAGE", "AWS_STORAGE_BUCKET_NAME", "AWS_S3_ENDPOINT_URL",
            "AWS_SECRET_ACCESS_KEY"} <= set(SETTING_NAMES)
    default = json.loads(_storages_with({}, tmp_path).stdout.splitlines()[-1])
    assert default["STORAGES"]["default"] == default["STORAGES"]["archive"] == (
        "django.core.files.storage.FileSystemStorage"
    )
    s3 = _storages_with(
        {"REPORT_STORAGE": "s3", "AWS_STORAGE_BUCKET_NAME": "b", "AWS_LOCATION": "/prod/"}, tmp_path
    )
    s3_storages = json.loads(s3.stdout.splitlines()[-1])
    assert (s3_storages["STORAGES"]["default"] == s3_storages["STORAGES"]["archive"]
            == "storages.backends.s3.S3Storage")
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
    for bad, options in [("probe=0", {"minimum": 1}), ("probe", {"minimum": 1}), ("=3", {}),
                         ("probe=urgent", {"choices": ("low",)})]:
        monkeypatch.setenv("X_KIND_MAP", bad)
        with pytest.raises(ImproperlyConfigured, match=f"X_KIND_MAP must look like .*{re.escape(repr(bad))}"):
            env.env_kind_map("X_KIND_MAP", **options)


def test_up_restart_limits_are_read_from_the_environment(tmp_path):
    defaults = _settings_with({}, tmp_path)
    assert (defaults["UP_RESTART_LIMIT"], defaults["UP_RESTART_WINDOW"]) == ("5", "60.0")
    chosen = _settings_with({"UP_RESTART_LIMIT": "2", "UP_RESTART_WINDOW": "300"}, tmp_path)
    assert (chosen["UP_RESTART_LIMIT"], chosen["UP_RESTART_WINDOW"]) == ("2", "300.0")


def test_a_choice_reads_one_of_its_values_without_case(monkeypatch):
    monkeypatch.setenv("X_CHOICE", " zh-Hans ")
    assert env.env_choice("X_CHOICE", "en", choices=["en", "zh-hans"]) == "zh-hans"
    monkeypatch.setenv("X_CHOICE", "fr")
    with pytest.raises(ImproperlyConfigured, match="X_CHOICE must be one of en, zh-hans, got 'fr'"):
        env.env_choice("X_CHOICE", "en", choices=["en", "zh-hans"])


def test_the_console_and_alert_languages_are_read_from_the_environment(tmp_path):
    assert {"LANGUAGE_CODE", "ALERT_LANGUAGE"} <= set(SETTING_NAMES)
    defaults = _settings_with({}, tmp_path)
    assert (defaults["LANGUAGE_CODE"], defaults["ALERT_LANGUAGE"]) == ("'en'", "'zh-hans'")
    chosen = _settings_with({"LANGUAGE_CODE": "zh-Hans", "ALERT_LANGUAGE": "en"}, tmp_path)
    assert (chosen["LANGUAGE_CODE"], chosen["ALERT_LANGUAGE"]) == ("'zh-hans'", "'en'")
    with pytest.raises(AssertionError, match="ALERT_LANGUAGE must be one of en, zh-hans, got 'ja'"):
        _settings_with({"ALERT_LANGUAGE": "ja"}, tmp_path)


def test_alert_channel_settings_are_read_from_the_environment(tmp_path):
    channels = '[{"name": "ops", "type": "slack", "url": "https://hooks.slack.invalid/services/T/B/x"}]'
    values = _settings_with(
        {
            "ALERT_CHANNELS": channels,
            "ALERT_RESOLVED_AFTER_SECONDS": "600",
            "RELEASE_NAME": " v2.4.1 ",
            "EMAIL_HOST": "smtp.example.invalid",
            "EMAIL_PORT": "587",
            "EMAIL_HOST_USER": "alerts",
            "EMAIL_HOST_PASSWORD": "mail-pass",
            "EMAIL_USE_TLS": "true",
            "EMAIL_USE_SSL": "false",
            "DEFAULT_FROM_EMAIL": "alerts@example.invalid",
        },
        tmp_path,
    )
    assert values["ALERT_CHANNELS"] == repr(channels)
    assert values["ALERT_RESOLVED_AFTER_SECONDS"] == "600" and values["RELEASE_NAME"] == "'v2.4.1'"
    assert values["EMAIL_HOST"] == "'smtp.example.invalid'" and values["EMAIL_PORT"] == "587"
    assert values["EMAIL_HOST_USER"] == "'alerts'" and values["EMAIL_HOST_PASSWORD"] == "'mail-pass'"
    assert values["EMAIL_USE_TLS"] == "True" and values["EMAIL_USE_SSL"] == "False"
    assert values["DEFAULT_FROM_EMAIL"] == "'alerts@example.invalid'"
    defaults = _settings_with({}, tmp_path)
    assert defaults["ALERT_CHANNELS"] == "'[]'" and defaults["ALERT_RESOLVED_AFTER_SECONDS"] == "1800"
    assert defaults["RELEASE_NAME"] == "''" and defaults["EMAIL_PORT"] == "25"


def test_a_malformed_alert_channel_list_fails_at_start_up_without_printing_its_url(tmp_path):
    bad = '[{"name": "ops", "type": "pager", "url": "https://hooks.invalid/secret-token-0123456789abcdef"}]'
    result = _storages_with({"ALERT_CHANNELS": bad}, tmp_path)
    assert result.returncode != 0 and "ALERT_CHANNELS: channel ops: type must be one of" in result.stderr
    assert "secret-token-0123456789abcdef" not in result.stderr


def test_the_worker_pool_is_sized_from_the_environment(tmp_path):
    unset = _settings_with({}, tmp_path)
    assert unset["REPORT_WORKER_CONCURRENCY"] == repr(os.cpu_count() or 1)
    assert (unset["REPORT_HORSE_MAX_TASKS"], unset["REPORT_HORSE_MAX_RSS_MB"]) == ("1000", "512")
    chosen = _settings_with(
        {"REPORT_WORKER_CONCURRENCY": "3", "REPORT_HORSE_MAX_TASKS": "1", "REPORT_HORSE_MAX_RSS_MB": "64"},
        tmp_path,
    )
    assert (chosen["REPORT_WORKER_CONCURRENCY"], chosen["REPORT_HORSE_MAX_TASKS"],
            chosen["REPORT_HORSE_MAX_RSS_MB"]) == ("3", "1", "64")


def test_metrics_settings_are_read_from_the_environment(tmp_path):
    read = _settings_with({"METRICS_ALLOWED_ADDRESSES": "10.0.0.0/8, 192.0.2.7"}, tmp_path)
    assert read["METRICS_ALLOWED_ADDRESSES"] == "['10.0.0.0/8', '192.0.2.7']"
    assert _settings_with({}, tmp_path)["METRICS_ALLOWED_ADDRESSES"] == "[]"
