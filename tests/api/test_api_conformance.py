"""Schemathesis against /report/openapi.json, every check, against the live server over real HTTP.

Plain Schemathesis: no hooks teach it this project's rules, so whatever the document allows must
be accepted (or answered with a status the document gives for it, and Schemathesis expects). A
fixed seed and a bounded number of examples per operation keep the run reproducible and inside
CI's time.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reports.kinds import KINDS
from reports.models import TaskStatus
from tests.factories import make_dead_letter, make_task

BASE_DIR = Path(__file__).resolve().parents[2]
SEED = 20261123
MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "40"))

# What it finds is the views', not the database's: CI runs it in its PostgreSQL session only.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow,
              pytest.mark.database_blind(on="postgresql")]


def test_schemathesis_finds_no_failure_with_every_check(live_server, api_token, tmp_path, settings):
    # A spent submit budget is a 429 for valid requests: the budget has tests of its own
    # (test_api_submit_budget.py); here every valid request must be accepted.
    settings.API_SUBMIT_RATE = None
    # Dead letters of every kind, for the links from the dead-letter page to a letter's actions (no
    # worker runs here, so no task dies on its own): replays with any kind's params reach them.
    for kind in KINDS:
        for _ in range(5):
            make_dead_letter(task=make_task(kind=kind, status=TaskStatus.DEAD, attempt=1, last_error="x"))
    report = tmp_path / "junit.xml"
    env = {k: v for k, v in os.environ.items() if k != "SCHEMATHESIS_HOOKS"}
    env.update(NO_COLOR="1")
    argv = [
        str(Path(sys.executable).with_name("st")),
        "run",
        f"{live_server.url}/report/openapi.json",
        "--checks", "all",
        "--phases", "examples,coverage,fuzzing,stateful",
        "--seed", str(SEED),
        "--max-examples", str(MAX_EXAMPLES),
        "--workers", "1",
        "--header", f"Authorization: Bearer {api_token}",
        "--generation-database", "none",
        "--report", "junit",
        "--report-junit-path", str(report),
        "--no-color",
    ]
    result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    # The whole report stays readable after the run (CI prints only this test's summary).
    (Path(settings.VAR_DIR) / "schemathesis-last-run.txt").write_text(output)
    summary = [line for line in output.splitlines()
               if re.search(r"\d+ (passed|failed)|No issues found", line)]
    print("\n".join(summary[-6:]))
    failures = output[output.find("FAILURES") :] if "FAILURES" in output else output[-6000:]
    assert result.returncode == 0, failures[:20000]
