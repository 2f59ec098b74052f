"""Each Chinese page under docs/zh/ keeps the sections of its English page.

The operators who read the runbook and the console page are Chinese-speaking: a section added to the
English page and not to the Chinese one (or the other way) fails here. Sections are compared by
their place and level (the titles are translated), and the commands and examples (the fenced
blocks) must be the same, in the same order.
"""

import re
from pathlib import Path

import pytest

from tests.docs.test_links import FENCE, prose_lines

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TRANSLATED = sorted((DOCS / "zh").glob("*.md"))
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+\S")


def outline(path: Path) -> list[int]:
    """The level of each heading, in page order (headings inside code are not headings)."""
    return [
        len(m.group(1))
        for _, line in prose_lines(path.read_text(encoding="utf-8"))
        if (m := HEADING.match(line))
    ]


def fenced_blocks(path: Path) -> list[str]:
    blocks, current, fence = [], [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        opening = FENCE.match(line)
        if fence is None and opening:
            fence, current = opening.group(1), []
        elif fence is not None and line.strip().startswith(fence):
            blocks.append("\n".join(current))
            fence = None
        elif fence is not None:
            current.append(line)
    return blocks


def test_the_operators_pages_are_translated():
    assert {p.name for p in TRANSLATED} >= {"runbook.md", "console.md"}


@pytest.mark.parametrize("chinese", TRANSLATED, ids=lambda p: p.name)
def test_a_chinese_page_has_the_sections_and_blocks_of_its_english_page(chinese):
    english = DOCS / chinese.name
    assert english.exists(), f"docs/zh/{chinese.name} has no English page docs/{chinese.name}"
    assert outline(chinese) == outline(english), (
        f"docs/zh/{chinese.name} and docs/{chinese.name} differ in their sections (levels in order): "
        f"{outline(chinese)} != {outline(english)}"
    )
    assert fenced_blocks(chinese) == fenced_blocks(english)


def test_outline_and_blocks_are_read_as_a_reader_sees_them(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\ntext\n\n## One\n\n```sh\n# not a heading\necho hi\n```\n\n### Two\n")
    assert outline(page) == [1, 2, 3]
    assert fenced_blocks(page) == ["# not a heading\necho hi"]
