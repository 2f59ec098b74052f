"""tests/browser.py: which browser the browser tests drive, and the one line when there is none."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser import NoBrowser, browser_executable, find_browser

BASE_DIR = Path(__file__).resolve().parents[2]


def fake_browser(directory: Path, name: str) -> Path:
    path = directory / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_a_chromium_on_the_path_is_found(tmp_path):
    assert find_browser(search_path=str(tmp_path)) is None
    expected = fake_browser(tmp_path, "chromium")
    assert find_browser(search_path=str(tmp_path)) == str(expected)


def test_other_chromium_builds_are_found_too(tmp_path):
    expected = fake_browser(tmp_path, "google-chrome")
    assert find_browser(search_path=str(tmp_path)) == str(expected)


def test_browser_executable_takes_the_configured_path_as_given(tmp_path, monkeypatch):
    chosen = fake_browser(tmp_path, "my-chrome")
    monkeypatch.setenv("BROWSER_EXECUTABLE", str(chosen))
    assert browser_executable() == str(chosen)
    monkeypatch.setenv("BROWSER_EXECUTABLE", str(tmp_path / "missing"))
    with pytest.raises(NoBrowser, match="is not an executable file"):
        browser_executable()


def test_without_a_browser_the_run_fails_once_with_one_line(tmp_path):
    """Every browser test selected, none can run: one error with one line, the rest deselected."""
    env = dict(os.environ, BROWSER_EXECUTABLE=str(tmp_path / "no-such-browser"))
    env.pop("TESTS_SPLIT_DATABASE_BLIND", None)  # CI's split would deselect them in one session
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/system/test_browser_pages.py"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    # The short test summary repeats the error's message (cut to the terminal's width or not), so
    # the lines are counted in the error report above it.
    report = result.stdout.split("short test summary info")[0]
    lines = [line for line in report.splitlines() if "no-such-browser is not an executable file" in line]
    assert len(lines) == 1, result.stdout[-3000:]
    assert "Traceback" not in result.stdout
    assert re.search(r"\d+ deselected, 1 error", result.stdout), result.stdout[-500:]


def test_as_root_debian_chromium_is_installed_updating_the_package_list_when_needed(tmp_path, monkeypatch):
    """A fake apt-get that refuses the first install (stale list), then installs a fake chromium."""
    from tests import browser

    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    (bindir / "apt-get").write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        f'if [ ! -e {tmp_path}/updated ]; then case "$*" in *update*) : > {tmp_path}/updated; exit 0;; esac; '
        'exit 100; fi\n'
        f'case "$*" in *install*) printf "#!/bin/sh\\n" > {bindir}/chromium; '
        f'/bin/chmod +x {bindir}/chromium;; esac\n'
    )
    (bindir / "apt-get").chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.setattr(browser.os, "geteuid", lambda: 0)
    monkeypatch.setattr(browser, "INSTALL_LOG", tmp_path / "install.log")
    monkeypatch.setattr(browser, "INSTALL_LOCK", tmp_path / "install.lock")

    assert browser.install_debian_chromium() == str(bindir / "chromium")
    assert calls.read_text().splitlines() == [
        "-o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends chromium",
        "-o DPkg::Lock::Timeout=600 update -q",
        "-o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends chromium",
    ]


def test_without_root_nothing_is_installed(tmp_path, monkeypatch):
    from tests import browser

    monkeypatch.setattr(browser.os, "geteuid", lambda: 1000)
    assert browser.install_debian_chromium() is None
