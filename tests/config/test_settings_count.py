"""At most 100 environment variables configure the application: every name passed to config.env's
readers (env_str, env_int, ...) or read from os.environ, anywhere but tests/ and bench/. A knob few
would set is a constant in the module that uses it; the web server's are gunicorn's own flags."""

import ast
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
LIMIT = 100
SKIPPED = {"tests", "bench", "node_modules", ".venv", "migrations"}
ENVIRON = "os.environ"


def _name_read(node: ast.AST) -> str | None:
    """The variable's name when `node` reads one: env_x("NAME", ...), os.environ.get("NAME"),
    os.environ.setdefault("NAME", ...), os.getenv("NAME") or os.environ["NAME"]."""
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        on_environ = isinstance(func, ast.Attribute) and ast.unparse(func.value) == ENVIRON
        on_environ = on_environ and called in ("get", "setdefault")
        if called.startswith("env_") or called == "getenv" or on_environ:
            return node.args[0].value if isinstance(node.args[0].value, str) else None
    loaded = isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
    if loaded and ast.unparse(node.value) == ENVIRON:
        return node.slice.value if isinstance(node.slice, ast.Constant) else None
    return None


def environment_variables() -> dict[str, list[str]]:
    """Each variable the application reads, with the places that read it."""
    found: dict[str, list[str]] = {}
    for path in sorted(BASE_DIR.rglob("*.py")):
        relative = path.relative_to(BASE_DIR)
        if SKIPPED & set(relative.parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if name := _name_read(node):
                found.setdefault(name, []).append(f"{relative}:{node.lineno}")
    return found


def test_the_scan_sees_every_kind_of_read():
    source = 'env_int("A", 1)\nos.environ.get("B")\nos.environ["C"]\nos.getenv("D")\nos.environ["E"] = "x"'
    tree = ast.parse(source)
    assert [name for node in ast.walk(tree) if (name := _name_read(node))] == ["A", "B", "C", "D"]


def test_the_application_reads_at_most_100_environment_variables():
    found = environment_variables()
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DB_CONN_MAX_AGE"} <= set(found)
    listing = "\n".join(f"{name}: {', '.join(where)}" for name, where in sorted(found.items()))
    assert len(found) <= LIMIT, f"{len(found)} environment variables:\n{listing}"
    print(f"{len(found)} environment variables (at most {LIMIT})")
