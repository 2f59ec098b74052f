"""The house's rules, checked on every test run: imports run one way, down the floors that
pyproject.toml declares (config <- transport <- reports <- deadletters <- console, api; the apps of
one floor never import each other), no import cycle (imports inside functions count), and no
application module over 400 lines (migrations excluded)."""

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOORS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["layers"]["floors"]
LAYERS = {app: level for level, apps in enumerate(FLOORS) for app in apps}
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    found = {}
    for app in LAYERS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    parts = name.split(".")
    while parts:
        if ".".join(parts) in MODULES:
            return ".".join(parts)
        parts.pop()
    return None


def _imports(module: str, path: Path) -> set[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        targets.update(t for t in map(_resolve, names) if t and t != module)
    return targets


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def test_imports_only_run_down_the_layers():
    upward = []
    for module, targets in GRAPH.items():
        app = module.split(".")[0]
        for target in targets:
            other = target.split(".")[0]
            if other != app and LAYERS[other] >= LAYERS[app]:
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_every_package_of_the_project_is_on_a_floor():
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()} - {"tests", "bench"}
    assert packages == set(LAYERS)


def test_the_transport_imports_no_domain_code():
    domain = [f"{m} -> {t}" for m, ts in GRAPH.items() if m.startswith("transport") for t in ts
              if t.split(".")[0] not in ("transport", "config")]
    assert domain == []


def test_no_import_cycle():
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(GRAPH[module]):
            if state.get(target) == 1:
                cycles.append(" -> ".join(path[path.index(target) :] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_no_module_over_400_lines():
    lengths = {module: len(path.read_text().splitlines()) for module, path in MODULES.items()}
    assert {module: n for module, n in lengths.items() if n > MAX_LINES} == {}
