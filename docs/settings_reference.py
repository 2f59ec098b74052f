"""Writes docs/settings.md, the settings reference, from the settings modules themselves.

    .venv/bin/python docs/settings_reference.py          # rewrite docs/settings.md
    .venv/bin/python docs/settings_reference.py --check  # exit 1 when docs/settings.md is out of date

A setting is an environment variable that a module of config/ reads through one of config/env.py's
readers (env_str, env_int, ...) or os.environ / os.getenv, with a literal name. For each one:

- default: the reader's default argument, as the code has it (a computed default is shown as code);
- what it does: the comment just above the statement that reads it, or at the end of its line;
  a variable whose code carries no comment takes its line from NOTES below;
- who sets it: production when docs/deploy.md's environment file sets it, `manage.py up` when up
  derives it, else whoever tunes it (WHO overrides);
- the section: the `# --- Section ---` header above it in config/settings.py; a module that
  settings.py includes (`from config.settings_x import *`) takes the header above that import.

Nothing here imports Django or the settings: the modules are read as text and parsed, so the
reference can be made on any checkout. NOTES entries for variables no longer read are ignored
(and listed on stderr), so removing a setting needs only a regeneration.
"""

import argparse
import ast
import io
import re
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config"
PAGE = ROOT / "docs" / "settings.md"
DEPLOY = ROOT / "docs" / "deploy.md"
UP = ROOT / "reports" / "management" / "commands" / "up.py"
HEADER = re.compile(r"^#\s*-{3,}\s*(.*?)\s*-*\s*$")

# One line for the variables whose code has no comment of its own.
NOTES = {
    "DEBUG": "Django's debug pages; never in production",
    "ALLOWED_HOSTS": "the host names the site answers to, comma-separated",
    "CSRF_TRUSTED_ORIGINS": "comma-separated `https://` origins allowed to post forms",
    "DATABASE_URL": "any dj-database-url URL; PostgreSQL in production",
    "REPORT_MAX_ATTEMPTS": "attempts per submit, and per replay",
    "REPORT_RETRY_BACKOFF": "seconds before attempt 2, 3, 4...; the last step repeats",
    "REPORT_RETRY_JITTER": "up to this fraction of a retry's delay is added at random",
    "REPORT_JOB_TIMEOUT": "seconds an attempt may run; an overrun is a `timeout` attempt",
    "HTTP_EXPORT_URL": "`http_export`'s default source, for tasks that give no `url`",
    "HTTP_EXPORT_ALLOWED_HOSTS": "`host` or `host:port` entries `http_export` may fetch from; empty: nothing",
    "DEADLETTER_RETENTION_DAYS": "open dead letters are archived after this many days",
    "CONSOLE_BASE_URL": "the console's public address, for the links in alerts and API answers",
    "MEDIA_ROOT": "report files, with `REPORT_STORAGE=filesystem`",
    "ARCHIVE_DIR": "purged dead letters, with `REPORT_STORAGE=filesystem`",
    "AWS_STORAGE_BUCKET_NAME": "the bucket, required with `REPORT_STORAGE=s3`",
    "AWS_S3_ENDPOINT_URL": "the S3 endpoint (MinIO, SeaweedFS, R2...); empty: AWS",
    "AWS_S3_REGION_NAME": "the bucket's region; empty: boto3's default",
    "AWS_SECRET_ACCESS_KEY": "the S3 secret; empty: boto3's credential chain",
    "AWS_S3_ADDRESSING_STYLE": "`path` or `virtual`",
    "LOG_LEVEL": "the application's log level",
    "REPORT_BATCH_MAX_ITEMS": "items per batch submit",
    "DINGTALK_AT_MOBILES": "comma-separated mobiles to @ in each alert (sent as markdown then)",
    "DINGTALK_RATE_PER_MINUTE": "messages a minute to the robot, shared by every sender",
    "DINGTALK_TIMEOUT": "seconds per request to DingTalk",
    "DINGTALK_MAX_SEND_ATTEMPTS": "failed sends before a message is `failed`",
    "DINGTALK_RETRY_BACKOFF": "seconds before each resend; the last step repeats",
    "DINGTALK_THROTTLE_BACKOFF_SECONDS": "pause of the robot after errcode 130101 (too fast)",
    "DINGTALK_CONFIG_ERROR_PAUSE_SECONDS": "pause after errcode 310000 (signature, keyword or clock)",
    "DINGTALK_WRAP_LINKS": "`true`: links open in the system browser from DingTalk's desktop client",
    "DINGTALK_DIGEST_MAX_GROUPS": "causes listed in a digest; the rest are summed in one line",
    "ALERT_RESOLVED_AFTER_SECONDS": "a cause quiet this long gets one resolved notice",
    "RELEASE_NAME": "the release being run; a cause first dying under it is new since it",
    "EMAIL_HOST": "SMTP server of the email channels",
    "EMAIL_PORT": "its port",
    "EMAIL_HOST_USER": "SMTP user",
    "EMAIL_HOST_PASSWORD": "SMTP password",
    "EMAIL_USE_TLS": "STARTTLS",
    "EMAIL_USE_SSL": "implicit TLS",
    "DEFAULT_FROM_EMAIL": "the alerts' sender address",
    "AXES_FAILURE_LIMIT": "failed logins of one username from one address before that pair is locked",
    "AXES_ADDRESS_FAILURE_LIMIT": "failed logins from one address, any usernames, before it is locked",
    "AXES_COOLOFF_MINUTES": "how long a login lock lasts after the failure that set it",
    "SESSION_COOKIE_SECURE": "`true` behind HTTPS",
    "CSRF_COOKIE_SECURE": "`true` behind HTTPS (follows `SESSION_COOKIE_SECURE`)",
    "SECURE_HSTS_SECONDS": "`31536000` once HTTPS works",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "`true` once every subdomain is HTTPS too",
    "SECURE_HSTS_PRELOAD": "`true` to ask browsers' preload lists",
    "SECURE_PROXY_SSL_HEADER": "the header a TLS-terminating proxy sets: `X-Forwarded-Proto=https`",
    "REDIS_URL": "`redis://`, `rediss://`, `unix://` or `redis+sentinel://`; unset: the embedded server",
    "REDIS_SOCKET_TIMEOUT": "seconds a Redis call may wait for its answer",
    "REDIS_RETRY_ATTEMPTS": "retries of one Redis call in workers and the housekeeper (10-21 s in all)",
    "REPORT_HORSE_MAX_TASKS": "a horse is replaced after this many jobs (1: a fork per job)",
    "REPORT_HORSE_MAX_RSS_MB": "a horse above this resident size after a job is replaced",
    "UP_RESTART_LIMIT": "`up` stops everything when a child exits more than this often within the window",
    "UP_RESTART_WINDOW": "that window, seconds",
    "REPORT_LEASE_SECONDS": "a running attempt not renewed this long is taken back (>= twice the heartbeat)",
    "SESSION_ABSOLUTE_TIMEOUT": "seconds after sign-in when a session ends, whatever the activity",
    "CONSOLE_TRUSTED_PROXY_COUNT": "reverse proxies in front of the site (nginx alone: 1)",
    "PROBE_FILE": "where a worker or the housekeeper writes its beat for `report-probe` (the image sets it)",
    "NOTIFY_SOCKET": "set by systemd (`Type=notify` or `WatchdogSec=`): the beat pings its watchdog",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "OpenTelemetry's own variable: traces over OTLP/HTTP to this collector",
    "OTEL_SERVICE_NAME": "the service name on those traces",
    "REPORT_KIND_PRIORITIES": "`kind=queue` pairs overriding a kind's default queue (`http_export=low`)",
}
# "Who sets it" where the rule (production / manage.py up / tuning) says too little.
WHO = {
    "RQ_ACCEPT_PICKLED_JOBS": "upgrades only",
    "DEBUG": "developers",
    "REPORT_DB_PREPARED_STATEMENTS": "production behind PgBouncer",
    "DEMO_SETUP": "production (deploy.md: `false`)",
    "NOTIFY_SOCKET": "systemd",
    "PROBE_FILE": "the container image",
}


@dataclass
class Setting:
    name: str
    default: str
    comment: str
    module: str
    section: str


@dataclass
class Module:
    path: Path
    comments: dict[int, str] = field(default_factory=dict)  # line -> comment text (without #)
    code_lines: set[int] = field(default_factory=set)  # lines holding something besides a comment


def read_module(path: Path) -> tuple[ast.Module, Module]:
    text = path.read_text(encoding="utf-8")
    module = Module(path)
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            module.comments[token.start[0]] = token.string.lstrip("#").strip()
        elif token.type not in (
            tokenize.NL,
            tokenize.NEWLINE,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.ENDMARKER,
        ):
            module.code_lines.update(range(token.start[0], token.end[0] + 1))
    return ast.parse(text), module


def reader_names() -> set[str]:
    """The readers config/env.py defines (env_str, env_int, ...)."""
    tree = ast.parse((CONFIG / "env.py").read_text(encoding="utf-8"))
    return {
        node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("env")
    }


def read_name(node: ast.AST, readers: set[str]) -> str | None:
    """The variable a node reads with a literal name: a call of a reader (or os.environ.get,
    os.getenv), or os.environ["NAME"]."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Load)
        and ast.unparse(node.value) == "os.environ"
    ):
        key = node.slice
        return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
    if not isinstance(node, ast.Call):
        return None
    call, func = node, node.func
    is_reader = isinstance(func, ast.Name) and func.id in readers
    is_environ = isinstance(func, ast.Attribute) and (
        (func.attr == "get" and ast.unparse(func.value) == "os.environ")
        or (func.attr == "getenv" and ast.unparse(func.value) == "os")
    )
    if (is_reader or is_environ) and call.args and isinstance(call.args[0], ast.Constant):
        value = call.args[0].value
        if isinstance(value, str) and re.fullmatch(r"[A-Z][A-Z0-9_]*", value):
            return value
    return None


def show_default(call: ast.AST, source: str) -> str:
    if not isinstance(call, ast.Call):
        return "(required)"  # os.environ["NAME"]
    node = (
        call.args[1]
        if len(call.args) > 1
        else next((kw.value for kw in call.keywords if kw.arg == "default"), None)
    )
    if node is None:
        return "(empty)"
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            return f"`{str(value).lower()}`"
        return "(empty)" if value == "" else f"`{value}`"
    if all(
        isinstance(n, (ast.Constant, ast.BinOp, ast.operator, ast.UnaryOp, ast.unaryop))
        for n in ast.walk(node)
    ):
        value = eval(compile(ast.Expression(node), "<default>", "eval"), {"__builtins__": {}})  # noqa: S307
        return f"`{value}`"
    return f"`{ast.get_source_segment(source, node)}`"


def innermost(statement: ast.stmt, node: ast.AST) -> ast.stmt:
    """The smallest statement within `statement` that holds `node`: a read inside a function is
    described by the comment above its own line, not by the function's."""
    best = statement
    for child in ast.walk(statement):
        if (
            isinstance(child, ast.stmt)
            and child.lineno <= node.lineno
            and child.end_lineno >= node.end_lineno
            and child.end_lineno - child.lineno <= best.end_lineno - best.lineno
        ):
            best = child
    return best


def comment_for(statement: ast.stmt, module: Module, node: ast.AST | None = None) -> str:
    """The comment block just above the statement that reads `node` (no blank line between), else
    one at the end of its lines (a compound statement's: up to the read, not its body)."""
    node = node or statement
    statement = innermost(statement, node)
    last = node.end_lineno if hasattr(statement, "body") else statement.end_lineno
    lines, number = [], statement.lineno - 1
    while number in module.comments and number not in module.code_lines:
        lines.insert(0, module.comments[number])
        number -= 1
    if lines and HEADER.match("# " + lines[0]):
        lines = []  # a section header, not a description
    if not lines:
        lines = [
            module.comments[n]
            for n in range(statement.lineno, last + 1)
            if n in module.comments and n in module.code_lines
        ]
    return " ".join(" ".join(lines).split())


def sections_of(settings_path: Path) -> tuple[dict[int, str], dict[str, str]]:
    """settings.py's section headers by line, and the section of each module it includes."""
    headers, included, current = {}, {}, "Core"
    for number, line in enumerate(settings_path.read_text(encoding="utf-8").splitlines(), start=1):
        match = HEADER.match(line.strip())
        if match:
            current = re.sub(r"\s*\(config/[\w.]+\)\s*$", "", match[1])
        headers[number] = current
        imported = re.match(r"from config\.(settings_\w+) import \*", line)
        if imported:
            # The header above an include names the included module's section, and only that.
            included[imported[1]] = current
            current = "Core"
    return headers, included


def collect() -> list[Setting]:
    readers = reader_names()
    settings_path = CONFIG / "settings.py"
    headers, included = sections_of(settings_path)
    found: dict[str, Setting] = {}
    paths = [settings_path, *sorted(p for p in CONFIG.glob("*.py") if p != settings_path)]
    for path in paths:
        source = path.read_text(encoding="utf-8")
        tree, module = read_module(path)
        for statement in tree.body:
            for node in ast.walk(statement):
                if not (name := read_name(node, readers)):
                    continue
                if path == settings_path:
                    section = headers.get(statement.lineno, "Core")
                else:
                    section = included.get(path.stem) or f"`config/{path.name}`"
                setting = Setting(
                    name,
                    show_default(node, source),
                    comment_for(statement, module, node),
                    f"config/{path.name}",
                    section,
                )
                known = found.get(name)
                # The first read with a default (and a comment) describes the variable.
                if known is None or (known.default == "(empty)" and setting.default != "(empty)"):
                    found[name] = setting
    return list(found.values())


def who_sets(name: str, production: set[str], up_names: set[str]) -> str:
    if name in WHO:
        return WHO[name]
    if name in production:
        return "production (deploy.md)"
    if name in up_names:
        return "`manage.py up` (from `--addr`)"
    return "tuning"


def render(settings: list[Setting]) -> str:
    deploy = DEPLOY.read_text(encoding="utf-8") if DEPLOY.exists() else ""
    production = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", deploy, re.MULTILINE))
    up_names = (
        set(re.findall(r'"([A-Z][A-Z0-9_]+)"', UP.read_text(encoding="utf-8"))) if UP.exists() else set()
    )
    out = [
        "# Settings",
        "",
        "<!-- Generated by docs/settings_reference.py from config/; edit the comments there, then run",
        "     .venv/bin/python docs/settings_reference.py -->",
        "",
        "Every setting is an environment variable, read once at start-up; a bad value stops the process",
        "with the variable's name, and an empty value means the default. *Who sets it*: production sets",
        "it in [deploy.md](deploy.md)'s environment file, `manage.py up` derives it from `--addr`, or it is",
        "for tuning (the default suits most sites).",
        "",
    ]
    sections: dict[str, list[Setting]] = {}
    for setting in settings:
        sections.setdefault(setting.section, []).append(setting)
    for section, rows in sections.items():
        out += [
            f"## {section}",
            "",
            "| variable | default | what it does | who sets it |",
            "| --- | --- | --- | --- |",
        ]
        for s in rows:
            what = (s.comment or NOTES.get(s.name) or "—").replace("|", "\\|")
            default = s.default.replace("|", "\\|")
            out.append(f"| `{s.name}` | {default} | {what} | {who_sets(s.name, production, up_names)} |")
        out.append("")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/settings.md is out of date")
    args = parser.parse_args()
    settings = collect()
    stale = sorted(set(NOTES) - {s.name for s in settings})
    if stale:
        print(
            f"NOTES for variables config/ no longer reads (delete them): {', '.join(stale)}", file=sys.stderr
        )
    text = render(settings)
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current != text:
            print(
                f"{PAGE.relative_to(ROOT)} is out of date: run .venv/bin/python docs/settings_reference.py",
                file=sys.stderr,
            )
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}: {len(settings)} settings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
