"""Every relative link and anchor in README.md, docs/*.md and docs/zh/*.md leads somewhere.

A link (or image) to a file must name a file or directory of the checkout; `page.md#anchor` and
`#anchor` must match a heading of that page by GitHub's slug rules, which are what a reader's
click follows on GitHub. Links inside code (fenced blocks, inline spans) are text, not links.
"""

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         *sorted((ROOT / "docs" / "zh").glob("*.md"))]

FENCE = re.compile(r"^ {0,3}(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target "title") and ![alt](target); the text may hold one level of brackets (badges).
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]+)\"", re.IGNORECASE)
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:...


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with inline code spans blanked."""
    lines, fence = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        opening = FENCE.match(line)
        if fence:
            if opening and line.strip().startswith(fence):
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        lines.append((number, INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)))
    return lines


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces to -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a page's headings (a repeated slug gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        if slug in seen:
            seen[slug] += 1
            slug = f"{slug}-{seen[slug]}"
        else:
            seen[slug] = 0
        found.add(slug)
    return found


def links(path: Path) -> list[tuple[int, str]]:
    found = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for pattern in (INLINE_LINK, HTML_LINK):
            found.extend((number, m.group(1)) for m in pattern.finditer(line))
        definition = REFERENCE_DEFINITION.match(line)
        if definition:
            found.append((number, definition.group(1)))
    return found


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with the page's relative links, one line each (empty when all lead somewhere)."""
    problems = []
    for number, target in links(path):
        if EXTERNAL.match(target):
            continue
        where = f"{path.relative_to(root)}:{number}: {target}"
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.is_relative_to(root):
            problems.append(f"{where}: points outside the checkout")
            continue
        if not destination.exists():
            problems.append(f"{where}: no such file")
            continue
        if not anchor:
            continue
        if destination.suffix != ".md":
            problems.append(f"{where}: an anchor into a file that is not a Markdown page")
        elif anchor not in anchors(destination):
            problems.append(f"{where}: no heading with the anchor #{anchor} in {destination.name}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_leads_somewhere(page):
    assert links(page), f"{page.name} links to nothing: is the link pattern still right?"
    problems = broken_links(page)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_docs_pages_exist():
    names = {str(p.relative_to(ROOT)) for p in PAGES}
    pages = ("runbook", "console", "api", "deploy", "settings", "architecture", "performance")
    translated = {"docs/zh/runbook.md", "docs/zh/console.md"}
    assert {"README.md", *(f"docs/{page}.md" for page in pages), *translated} <= names


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Set up", "set-up"),
        ("Outbound requests (SSRF policy)", "outbound-requests-ssrf-policy"),
        ("Batches, priorities and paused kinds", "batches-priorities-and-paused-kinds"),
        ("`manage.py archive_deadletters`", "managepy-archive_deadletters"),
        ("3 a.m. runbook: by symptom", "3-am-runbook-by-symptom"),
        ("Tokens and scopes", "tokens-and-scopes"),
        ("Alerts on [DingTalk](https://www.dingtalk.com/)", "alerts-on-dingtalk"),
        ("告警 alerts", "告警-alerts"),
    ],
)
def test_github_slug(heading, slug):
    assert github_slug(heading) == slug


def test_broken_links_are_reported(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "img.png").write_bytes(b"")
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "README.md"
    page.write_text(
        "# Title\n\n"
        "[fine](docs/other.md) [fine](docs/other.md#other-page) [fine](docs/other.md#twice-1)\n"
        "[fine](#title) ![fine](img.png) [external](https://example.com/#nowhere)\n"
        "`[code](missing.md)`\n\n```\n[code](missing.md)\n```\n\n"
        "[gone](docs/missing.md) ![gone](missing.png) [bad](docs/other.md#nowhere) [bad](#twice)\n"
        '<img src="nothing.png">\n\n[ref]: docs/absent.md\n'
    )
    assert [problem.split(": ", 1)[1] for problem in broken_links(page, root=tmp_path)] == [
        "docs/missing.md: no such file",
        "missing.png: no such file",
        "docs/other.md#nowhere: no heading with the anchor #nowhere in other.md",
        "#twice: no heading with the anchor #twice in README.md",
        "nothing.png: no such file",
        "docs/absent.md: no such file",
    ]
