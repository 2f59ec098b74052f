"""Two OpenAPI linters nobody here wrote, with their own recommended rules, read the served document:
Redocly CLI (its `recommended` ruleset) and Spectral (`spectral:oas`, .spectral.yaml). Both come from
package.json/package-lock.json at the project root and run from node_modules/.bin; the first run
installs them with `npm ci`."""

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parents[2]
BIN = BASE_DIR / "node_modules" / ".bin"
QUIET = {"REDOCLY_TELEMETRY": "off", "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true", "NO_UPDATE_NOTIFIER": "1"}


def node_tool(name: str) -> str:
    """node_modules/.bin/NAME, after `npm ci` when node_modules is missing (one install at a time:
    CI runs two test sessions side by side)."""
    checkout = hashlib.sha256(str(BASE_DIR).encode()).hexdigest()[:16]  # str hash() differs per process
    lock_path = Path(tempfile.gettempdir()) / f"npm-ci-{checkout}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (BIN / name).exists():
            npm = shutil.which("npm")
            if npm is None:
                pytest.fail("npm is not installed: the OpenAPI linters (package.json) need Node.js and npm",
                            pytrace=False)
            result = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=BASE_DIR, capture_output=True,
                                    text=True, timeout=600)
            assert result.returncode == 0, f"npm ci failed:\n{result.stderr[-3000:]}"
    return str(BIN / name)


@pytest.fixture
def served_document(client, tmp_path):
    response = client.get("/report/openapi.json")
    assert response.status_code == 200
    path = tmp_path / "openapi.json"
    path.write_bytes(response.content)
    return path


def run(argv: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, **QUIET)
    return subprocess.run(argv, cwd=BASE_DIR, capture_output=True, text=True, timeout=300, env=env)


def test_redocly_finds_no_error_and_no_warning(served_document):
    result = run([node_tool("redocly"), "lint", str(served_document), "--format", "json"])
    report = json.loads(result.stdout[result.stdout.index("{") :])
    problems = [f"{p['severity']} {p['ruleId']}: {p['message']}" for p in report["problems"]]
    print(f"redocly: {report['totals']}")
    assert (report["totals"]["errors"], report["totals"]["warnings"]) == (0, 0), "\n".join(problems)
    assert result.returncode == 0, result.stderr[-3000:]


def test_spectral_oas_finds_nothing(served_document, tmp_path):
    output = tmp_path / "spectral.json"
    result = run([
        node_tool("spectral"), "lint", str(served_document), "--format", "json", "--fail-severity", "hint",
        "--output", str(output),
    ])
    assert output.exists(), result.stdout[-2000:] + result.stderr[-2000:]
    findings = json.loads(output.read_text())
    print(f"spectral: {len(findings)} findings")
    assert findings == [], "\n".join(f"{f['code']} {'.'.join(map(str, f['path']))}: {f['message']}"
                                     for f in findings)
    assert result.returncode == 0, result.stderr[-3000:]
