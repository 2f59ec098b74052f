"""The suite's settings do not depend on the shell it runs in (tests/settings.py)."""

import json
import os
import subprocess
import sys

from tests.settings import CONFIG_DIR, SHELL_NAMES

PROBE = """
import json, os, django
django.setup()
from django.conf import settings
names = ["DEMO_SETUP", "HTTP_EXPORT_URL", "HTTP_EXPORT_ALLOWED_HOSTS", "DINGTALK_WEBHOOK",
         "REPORT_MAX_ATTEMPTS"]
print(json.dumps({name: repr(getattr(settings, name)) for name in names}
                 | {"environ": sorted(set(os.environ) & set(%r))}))
"""


def _suite_settings_under(shell: dict) -> dict:
    environ = {name: value for name, value in os.environ.items() if name not in SHELL_NAMES}
    environ.update(shell, DJANGO_SETTINGS_MODULE="tests.settings")
    result = subprocess.run(
        [sys.executable, "-c", PROBE % (SHELL_NAMES,)],
        cwd=CONFIG_DIR.parent,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_developers_shell_changes_none_of_the_suites_settings():
    shell = {
        "REDIS_URL": "redis://127.0.0.1:6379/0",
        "DEMO_SETUP": "false",
        "HTTP_EXPORT_URL": "http://exporter.internal/orders.json",
        "HTTP_EXPORT_ALLOWED_HOSTS": "exporter.internal",
        "DINGTALK_WEBHOOK": "https://oapi.dingtalk.com/robot/send?access_token=real-team-robot",
        "REPORT_MAX_ATTEMPTS": "9",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector.internal:4318",
    }
    assert set(shell) <= set(SHELL_NAMES)

    assert (
        _suite_settings_under(shell)
        == _suite_settings_under({})
        == {
            "DEMO_SETUP": "True",
            "HTTP_EXPORT_URL": "'http://127.0.0.1:8000/report/demo/orders.json'",
            "HTTP_EXPORT_ALLOWED_HOSTS": "['127.0.0.1:8000']",
            "DINGTALK_WEBHOOK": "''",
            "REPORT_MAX_ATTEMPTS": "3",
            "environ": [],
        }
    )


def test_the_database_under_test_is_still_chosen_by_the_shell():
    assert "DATABASE_URL" in SHELL_NAMES
    chosen = _suite_settings_under({"DATABASE_URL": "sqlite:////tmp/chosen.sqlite3"})
    assert chosen["environ"] == ["DATABASE_URL"]
