"""Which browser the browser tests drive: one Playwright can launch without downloading its own.

In order: BROWSER_EXECUTABLE (a path, used as given), Debian's chromium or another Chromium/Chrome
on PATH, a browser Playwright installed itself earlier; else, when this process may (root with
apt-get), Debian's chromium is installed. When none can be had the tests say so in one line.
"""

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
INSTALL_LOG = Path(os.environ.get("TMPDIR", "/tmp")) / "report-console-browser-install.log"
# CI runs two test sessions side by side: one installs, the other waits for it.
INSTALL_LOCK = INSTALL_LOG.with_suffix(".lock")


class NoBrowser(Exception):
    """The one line the tests fail with when no browser can be had."""


def playwright_own_browser() -> str | None:
    """A Chromium that `playwright install chromium` put in its cache (none on a fresh machine)."""
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            path = playwright.chromium.executable_path
    except Exception:  # noqa: BLE001 - no driver or no cache: simply not available
        return None
    return path if path and Path(path).exists() else None


def find_browser(*, names=NAMES, search_path: str | None = None) -> str | None:
    for name in names:
        found = shutil.which(name, path=search_path)
        if found:
            return found
    return None


def install_debian_chromium() -> str | None:
    """apt-get install chromium, when we are root and apt-get exists; the output goes to INSTALL_LOG."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("apt-get"):
        return None
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    wait_for_dpkg = ["-o", "DPkg::Lock::Timeout=600"]
    with INSTALL_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if find_browser():
            return find_browser()
        with INSTALL_LOG.open("w") as log:
            for argv in (
                ["apt-get", *wait_for_dpkg, "install", "-y", "-q", "--no-install-recommends", "chromium"],
                ["apt-get", *wait_for_dpkg, "update", "-q"],  # a stale list is why a first try fails
                ["apt-get", *wait_for_dpkg, "install", "-y", "-q", "--no-install-recommends", "chromium"],
            ):
                done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=900)
                if done.returncode == 0 and "install" in argv:
                    break
    return find_browser()


def browser_executable() -> str:
    """The browser to launch, or NoBrowser with one line saying what to do."""
    configured = os.environ.get("BROWSER_EXECUTABLE", "").strip()
    if configured:
        if Path(configured).is_file() and os.access(configured, os.X_OK):
            return configured
        raise NoBrowser(f"BROWSER_EXECUTABLE={configured} is not an executable file")
    found = find_browser() or playwright_own_browser() or install_debian_chromium()
    if found:
        return found
    raise NoBrowser(
        "no Chromium for the browser tests: install Debian's chromium (apt-get install chromium, as root) "
        "or set BROWSER_EXECUTABLE to a Chromium/Chrome binary"
        + (f"; the install attempt's output is in {INSTALL_LOG}" if INSTALL_LOG.exists() else "")
    )
