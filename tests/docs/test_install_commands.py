"""Every command that installs the project into a virtualenv first brings pip and setuptools up to
date: a virtualenv starts with the setuptools its Python bundles (65.5 with Python 3.11, which has
known advisories), and installing the project upgrades neither."""

import re
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
FILES = ("README.md", ".ci/run", "docs/deploy.md")
INSTALLS_PROJECT = re.compile(r"pip install (?:-q )?-e ")
UPGRADES_BUILD_TOOLS = re.compile(r"pip install -q -U pip setuptools(?: |$|\n|&)")


def test_each_project_install_upgrades_pip_and_setuptools_first():
    installs = []
    for name in FILES:
        lines = (BASE_DIR / name).read_text().splitlines()
        for number, line in enumerate(lines):
            for match in INSTALLS_PROJECT.finditer(line):
                above = next((ln for ln in reversed(lines[:number]) if ln.strip()), "")
                before = f"{above}\n{line[: match.start()]}"
                installs.append((f"{name}:{number + 1}", bool(UPGRADES_BUILD_TOOLS.search(before))))
    assert len(installs) >= 3, installs
    assert [where for where, upgraded in installs if not upgraded] == []
