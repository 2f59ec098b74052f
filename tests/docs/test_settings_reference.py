"""docs/settings.md has one row for each environment variable config/ reads, and no other.

The variables are found here on their own (a plain search of config/*.py for the env readers and
os.environ), not with the generator's parser, so a reader the generator misses fails too. When a
setting is added or removed, regenerate: `.venv/bin/python docs/settings_reference.py`.
"""

import ast
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "settings.md"
READ = re.compile(r"""\b(?:env_\w+|os\.environ\.get|os\.getenv)\(\s*["']([A-Z][A-Z0-9_]*)["']""")
SUBSCRIPT = re.compile(
    r"""\bos\.environ\[\s*["']([A-Z][A-Z0-9_]*)["']\s*\](?!\s*=[^=])"""
)  # read, not assigned
ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]*)` \|", re.MULTILINE)
REGENERATE = "run .venv/bin/python docs/settings_reference.py"


def generator():
    spec = importlib.util.spec_from_file_location(
        "settings_reference", ROOT / "docs" / "settings_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_by_config() -> set[str]:
    names = set()
    for path in (ROOT / "config").glob("*.py"):
        if path.name == "env.py":  # the readers themselves
            continue
        text = path.read_text(encoding="utf-8")
        names |= set(READ.findall(text)) | set(SUBSCRIPT.findall(text))
    names.discard("DJANGO_SETTINGS_MODULE")  # asgi.py and wsgi.py set it; Django reads it
    return names


def test_every_variable_config_reads_has_one_row_and_no_row_names_another():
    rows = ROW.findall(PAGE.read_text(encoding="utf-8"))
    read = read_by_config()
    assert len(read) > 50, "the search for env readers found almost nothing: is its pattern still right?"
    assert sorted(name for name in set(rows) if rows.count(name) > 1) == [], "variables with two rows"
    assert sorted(read - set(rows)) == [], f"read by config/ but missing from docs/settings.md: {REGENERATE}"
    assert sorted(set(rows) - read) == [], f"in docs/settings.md but not read by config/: {REGENERATE}"


def test_the_generator_finds_what_config_reads():
    assert {setting.name for setting in generator().collect()} == read_by_config()


def test_a_settings_description_is_the_comment_above_it_or_on_its_line():
    reference = generator()
    source = (
        "# --- Section ---\n"
        "A = env_int('A', 64 * 1024)\n"
        "\n"
        "# What B does,\n"
        "# in two lines.\n"
        "B = env_bool('B', True)\n"
        "C = env_str('C')  # C's own words\n"
        "D = env_str('D', str(BASE / 'var'))\n"
    )
    tree = ast.parse(source)
    module = reference.Module(Path("x.py"))
    module.comments = {1: "--- Section ---", 4: "What B does,", 5: "in two lines.", 7: "C's own words"}
    module.code_lines = {2, 6, 7, 8}
    comments = [reference.comment_for(statement, module) for statement in tree.body]
    assert comments == ["", "What B does, in two lines.", "C's own words", ""]
    defaults = [reference.show_default(statement.value, source) for statement in tree.body]
    assert defaults == ["`65536`", "`true`", "(empty)", "`str(BASE / 'var')`"]
