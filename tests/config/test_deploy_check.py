"""Production settings come from the environment: with them, `manage.py check --deploy` has nothing
to say, and behind a TLS-terminating proxy SSL redirect leaves forwarded requests alone."""

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

from tests.config.test_env import SETTING_NAMES

BASE_DIR = Path(__file__).resolve().parents[2]


def production_environment(var_dir: Path) -> dict:
    # Not the test session's own switches either: the browser tests set DJANGO_ALLOW_ASYNC_UNSAFE
    # (Playwright's loop beside the ORM), which no deployment has and check --deploy refuses.
    environ = {
        k: v for k, v in os.environ.items() if k not in SETTING_NAMES and k != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    environ.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        VAR_DIR=str(var_dir),
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(60),
        ALLOWED_HOSTS="reports.example.com",
        CSRF_TRUSTED_ORIGINS="https://reports.example.com",
        CONSOLE_BASE_URL="https://reports.example.com",
        REDIS_URL="redis://redis.invalid:6379/0",
        SECURE_SSL_REDIRECT="true",
        SECURE_HSTS_SECONDS="31536000",
        SECURE_HSTS_INCLUDE_SUBDOMAINS="true",
        SECURE_HSTS_PRELOAD="true",
        SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto=https",
        SESSION_COOKIE_SECURE="true",
        CSRF_COOKIE_SECURE="true",
    )
    return environ


def test_check_deploy_is_clean_with_the_production_environment(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=BASE_DIR,
        env=production_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


PROXY_PROBE = """
import json, django
django.setup()
from django.conf import settings
from django.test import Client
client = Client(HTTP_HOST="reports.example.com")
answers = {}
for path in ("/static/css/console.css", "/report/openapi.json", "/console/login/"):
    forwarded = client.get(path, HTTP_X_FORWARDED_PROTO="https")
    plain = client.get(path)
    answers[path] = [forwarded.status_code, forwarded.get("Strict-Transport-Security"),
                     plain.status_code, plain.get("Location")]
print(json.dumps({"header": settings.SECURE_PROXY_SSL_HEADER, "answers": answers}))
"""


def test_behind_the_proxy_static_openapi_and_login_answer_and_plain_http_is_redirected(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", PROXY_PROBE],
        cwd=BASE_DIR,
        env=production_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    assert probe["header"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    for path, (forwarded, hsts, plain, location) in probe["answers"].items():
        assert forwarded == 200, path
        assert hsts == "max-age=31536000; includeSubDomains; preload", path
        assert (plain, location) == (301, f"https://reports.example.com{path}"), path
