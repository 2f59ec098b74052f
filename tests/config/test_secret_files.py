"""var/ is private from its first moment: the directory 0700, the secret key, the admin password and
the SQLite database 0600, whatever the umask; the admin password is printed on the first start only."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from reports.management.commands.up import Command as UpCommand
from tests.config.test_env import SETTING_NAMES

BASE_DIR = Path(__file__).resolve().parents[2]
PROBE = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _start(var_dir: Path) -> subprocess.Popen:
    """A process that loads the settings with the default database, umask 000: every bit of a
    file's mode is what the code asked for."""
    environ = {k: v for k, v in os.environ.items() if k not in SETTING_NAMES}
    environ.update(DJANGO_SETTINGS_MODULE="config.settings", VAR_DIR=str(var_dir))
    return subprocess.Popen(
        [sys.executable, "-c", PROBE],
        cwd=BASE_DIR,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.umask(0),
    )


def _secret_key_of(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    return out.strip().splitlines()[-1]


def test_a_fresh_var_dir_is_private_from_the_start(tmp_path):
    var_dir = tmp_path / "var"
    key = _secret_key_of(_start(var_dir))
    assert len(key) >= 50
    assert _mode(var_dir) == 0o700
    assert _mode(var_dir / "secret_key") == 0o600
    assert _mode(var_dir / "db.sqlite3") == 0o600
    assert (var_dir / "secret_key").read_text().strip() == key
    assert not [p.name for p in var_dir.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_loose_modes_left_by_an_earlier_release_are_tightened(tmp_path):
    var_dir = tmp_path / "var"
    var_dir.mkdir(mode=0o755)
    var_dir.chmod(0o755)
    (var_dir / "db.sqlite3").touch()
    (var_dir / "db.sqlite3").chmod(0o644)
    (var_dir / "secret_key").write_text("kept-from-before-" + "x" * 40)
    (var_dir / "secret_key").chmod(0o644)
    assert _secret_key_of(_start(var_dir)) == "kept-from-before-" + "x" * 40
    assert (_mode(var_dir), _mode(var_dir / "db.sqlite3"), _mode(var_dir / "secret_key")) == (
        0o700, 0o600, 0o600)


def test_processes_starting_together_share_one_secret_key(tmp_path):
    var_dir = tmp_path / "var"
    processes = [_start(var_dir) for _ in range(4)]
    keys = {_secret_key_of(proc) for proc in processes}
    assert len(keys) == 1 and len(keys.pop()) >= 50


@pytest.mark.django_db
def test_up_prints_the_admin_password_on_the_first_start_only(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    old_umask = os.umask(0)
    try:
        first, second = UpCommand(), UpCommand()
        password = first._ensure_admin()
        again = second._ensure_admin()
    finally:
        os.umask(old_umask)
    assert password and get_user_model().objects.get(username="admin").check_password(password)
    assert (tmp_path / "admin_password").read_text() == password
    assert _mode(tmp_path / "admin_password") == 0o600
    assert again is None
    printed = [UpCommand.console_line("127.0.0.1:8000", p) for p in (password, again)]
    assert password in printed[0]
    assert password not in printed[1] and "var/admin_password" in printed[1]


def test_a_shared_sticky_directory_given_as_var_dir_is_left_open(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    _secret_key_of(_start(shared))
    assert _mode(shared) == 0o1777
    assert _mode(shared / "secret_key") == 0o600
