"""The settings the suite runs with (`--ds=tests.settings` in pyproject.toml): config.settings as a
shell that sets none of the project's variables gives them, whatever the developer's shell exports
(a REDIS_URL of a running Redis ends the demo setup and empties its outbound allowlist; a robot's
DINGTALK_WEBHOOK would be sent the tests' alerts). DATABASE_URL alone is kept: it picks the database
under test. Every process the tests start inherits the cleaned environment.

This is a settings module rather than a fixture in tests/conftest.py because pytest-django reads
the settings before any conftest is imported."""

import os
import re
from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent.parent / "config"
# Every variable a module under config/ reads (through config.env, or os.environ for the tracing).
SHELL_NAMES = sorted(
    {
        name
        for path in sorted(CONFIG_DIR.glob("*.py"))
        for name in re.findall(r'(?:env_\w+\(|environ\.get\()\s*"([A-Z0-9_]+)"', path.read_text())
    }
)
KEPT = {"DATABASE_URL"}

for _name in SHELL_NAMES:
    if _name not in KEPT:
        os.environ.pop(_name, None)
# Processes the tests start (manage.py, gunicorn) load the project's own settings module.
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"

from config.settings import *  # noqa: E402, F403
