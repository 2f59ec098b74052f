"""docs/deploy.md as data, for tests/system/test_deploy_doc.py: the files it names, the commands it
shows, and the way the test moves them onto one machine.

The page's convention: a fenced code block is a file when the last non-blank line above its opening
fence is ``File `PATH`...:`` (for example ``File `/etc/redis/sentinel-1.conf` (on redis-1):``).
The block's text is the file, exactly; nothing is added to it. Other blocks are commands or examples.

Moving the page onto one machine is one explicit table (`Relocation.table`), applied in one pass
(a replaced text is never replaced again): the machines' private addresses become 127.0.0.1, every
port the page names except PostgreSQL's 5432 becomes a free one, the database role and name become a
scratch name, absolute paths under /etc, /var, /run and /usr/local move under a temporary root, the
checkout (/srv/report-console) is this one and its virtualenv the one running the tests, and
/opt/seaweedfs/bin/weed is the `weed` the dev extra installs. Nothing else is changed.
"""

import re
import shlex
import socket
from dataclasses import dataclass, field
from pathlib import Path

FILE_LINE = re.compile(r"^File `(?P<path>/[^`]+)`.*:$")
FENCE = re.compile(r"^```")
ADDRESSES = ("10.0.0.5", "10.0.0.11", "10.0.0.21", "10.0.0.22", "10.0.0.31")
# Every port the page's files name, PostgreSQL's (5432, where the test's server is) aside.
PORTS = (
    80, 443, 8000,  # nginx, gunicorn
    6379, 6380, 26379, 26380, 26381,  # Redis master, replica, sentinels
    # weed mini: s3, master, volume, filer, admin
    8333, 18333, 9333, 19333, 8080, 18080, 8888, 18888, 23646, 33646,
)
DATABASE_NAME = "report_console"  # the role and the database the page creates
MOVED_UNDER_ROOT = ("/etc/", "/var/", "/run/", "/usr/local/")
CHECKOUT = "/srv/report-console"
WEED = "/opt/seaweedfs/bin/weed"


def code_blocks(markdown: str) -> list[tuple[str | None, str]]:
    """(file path or None, text) for every fenced block, in page order."""
    blocks, lines, index = [], markdown.splitlines(), 0
    while index < len(lines):
        if not FENCE.match(lines[index]):
            index += 1
            continue
        above = next((line for line in reversed(lines[:index]) if line.strip()), "")
        match = FILE_LINE.match(above.strip())
        end = next(n for n in range(index + 1, len(lines)) if lines[n].startswith("```"))
        blocks.append((match["path"] if match else None, "\n".join(lines[index + 1 : end]) + "\n"))
        index = end + 1
    return blocks


def page_files(markdown: str) -> dict[str, str]:
    files = {}
    for path, text in code_blocks(markdown):
        if path:
            assert path not in files, f"docs/deploy.md names {path} twice"
            files[path] = text
    return files


def environment_file(text: str) -> dict[str, str]:
    """What systemd's EnvironmentFile= reads from the page's file: NAME=value lines, # comments."""
    values = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, sep, value = line.partition("=")
            assert sep and name.strip().isidentifier(), f"not a NAME=value line: {line!r}"
            values[name.strip()] = value.strip()
    return values


@dataclass
class Unit:
    """The parts of a systemd service the test carries out. User/Group (the test runs as whoever runs
    it), Restart=, KillMode= and the timeouts are systemd's business and are not imitated."""

    working_directory: str
    environment_files: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    exec_start: str = ""

    def argv(self, instance: str = "") -> list[str]:
        specifiers = {"%i": instance, "%H": socket.gethostname(), "%%": "%"}
        text = re.sub(r"%.", lambda m: specifiers[m.group()], self.exec_start)
        return shlex.split(text)


def parse_unit(text: str) -> Unit:
    unit = Unit(working_directory="/")
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
            continue
        key, _, value = line.partition("=")
        if section != "[Service]":
            continue
        if key == "WorkingDirectory":
            unit.working_directory = value
        elif key == "EnvironmentFile":
            unit.environment_files.append(value)
        elif key == "Environment":
            name, _, setting = value.partition("=")
            unit.environment[name] = setting
        elif key == "ExecStart":
            unit.exec_start = value
    return unit


class Relocation:
    """The page's set-up, moved onto this machine by one explicit table (see the module docstring)."""

    def __init__(self, *, root: Path, checkout: Path, venv_bin: Path, weed: str, scratch_name: str,
                 free_port):
        self.root = root
        self.ports = {port: free_port() for port in PORTS}
        self.table: dict[str, str] = {address: "127.0.0.1" for address in ADDRESSES}
        self.table.update({str(port): str(new) for port, new in self.ports.items()})
        self.table[DATABASE_NAME] = scratch_name
        self.table.update({prefix: f"{root}{prefix}" for prefix in MOVED_UNDER_ROOT})
        self.table[f"{CHECKOUT}/.venv/bin/"] = f"{venv_bin}/"
        self.table[CHECKOUT] = str(checkout)
        self.table[WEED] = weed
        keys = sorted(self.table, key=len, reverse=True)  # the longest first: /srv/x/.venv/bin/ before /srv/x
        # Addresses, ports and the name only as whole words; paths only where a path starts.
        words = [re.escape(key) for key in keys if not key.startswith("/")]
        paths = [re.escape(key) for key in keys if key.startswith("/")]
        self.pattern = re.compile(
            r"(?<![\w.])(" + "|".join(words) + r")(?![\w.])|(?<![\w/.])(" + "|".join(paths) + ")"
        )
        self.used: set[str] = set()

    def __call__(self, text: str) -> str:
        def replace(match: re.Match) -> str:
            key = match.group(1) or match.group(2)
            self.used.add(key)
            return self.table[key]

        return self.pattern.sub(replace, text)

    def port(self, page_port: int) -> int:
        return self.ports[page_port]

    def path(self, page_path: str) -> Path:
        return Path(self(page_path))

    def unused(self) -> set[str]:
        """Entries the page never needed: a sign the table and the page have drifted apart."""
        return set(self.table) - self.used
