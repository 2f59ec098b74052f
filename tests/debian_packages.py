"""Programs the tests run that this project did not write (chromium, nginx, promtool): found on PATH
(or in /usr/sbin), else installed from Debian's package when this process may (root with apt-get).
CI runs two test sessions side by side: one installs, the other waits for it."""

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

SEARCH_PATH = f"{os.environ.get('PATH', '')}:/usr/sbin:/usr/bin"


def install_log(package: str) -> Path:
    return Path(os.environ.get("TMPDIR", "/tmp")) / f"report-console-{package}-install.log"


def find_program(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name, path=SEARCH_PATH)
        if found:
            return found
    return None


def installed_program(package: str, *names: str) -> str | None:
    """The first of `names` found, after `apt-get install package` when none is; None when none can be
    had (the attempt's output is in install_log(package))."""
    found = find_program(*names)
    if found or not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("apt-get"):
        return found
    log_path = install_log(package)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=600"]
    install = [*apt, "install", "-y", "-q", "--no-install-recommends", package]
    with log_path.with_suffix(".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if find_program(*names):
            return find_program(*names)
        with log_path.open("w") as log:
            for argv in (install, [*apt, "update", "-q"], install):  # a stale list is why a first try fails
                done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=900)
                if done.returncode == 0 and argv is install:
                    break
    return find_program(*names)


def missing_program_message(package: str, what: str) -> str:
    log_path = install_log(package)
    return f"no {what}: apt-get install {package} (as root), or put it on PATH" + (
        f"; the install attempt's output is in {log_path}" if log_path.exists() else ""
    )
