"""The committed Chinese catalogue: complete, not fuzzy, placeholders kept, and its .mo compiled from its .po.

A fresh machine needs no gettext tools: Django reads the committed .mo, so it must say what the .po says.
"""

import gettext
import re
from pathlib import Path

import polib
import pytest
from django.utils import translation

LC_MESSAGES = Path(__file__).resolve().parents[1] / "locale" / "zh_Hans" / "LC_MESSAGES"
PLACEHOLDER = re.compile(r"%\((\w+)\)[sdr]|%\((\w+)\)\.\d+f")


@pytest.fixture(scope="module")
def po():
    return polib.pofile(str(LC_MESSAGES / "django.po"))


def _translations(entry) -> list[str]:
    return list(entry.msgstr_plural.values()) if entry.msgid_plural else [entry.msgstr]


def _names(text: str) -> set[str]:
    return {a or b for a, b in PLACEHOLDER.findall(text)}


def test_no_entry_is_empty_fuzzy_or_obsolete(po):
    assert len(po) > 500
    assert po.metadata["Plural-Forms"].startswith("nplurals=1;")
    assert not [e.msgid for e in po if e.fuzzy or not all(_translations(e))]
    assert not po.obsolete_entries()


def test_every_translation_keeps_the_placeholders_and_markup_of_its_msgid(po):
    problems = []
    for entry in po:
        for text in _translations(entry):
            expected = _names(entry.msgid) | (_names(entry.msgid_plural) if entry.msgid_plural else set())
            if _names(text) != expected:
                problems.append((entry.msgid, text))
            if sorted(re.findall(r"</?\w+", text)) != sorted(re.findall(r"</?\w+", entry.msgid)):
                problems.append((entry.msgid, text))
    assert not problems


def test_the_committed_mo_says_what_the_po_says(po, tmp_path):
    committed = polib.mofile(str(LC_MESSAGES / "django.mo"))

    def catalogue(entries):
        return {(e.msgctxt, e.msgid, e.msgid_plural): tuple(_translations(e)) for e in entries if e.msgid}

    assert catalogue(committed) == catalogue(po)
    # And compiling the .po afresh gives the same catalogue: the .mo was not edited by hand or left stale.
    po.save_as_mofile(str(tmp_path / "fresh.mo"))
    assert catalogue(polib.mofile(str(tmp_path / "fresh.mo"))) == catalogue(committed)


def test_python_reads_the_committed_mo(po):
    with (LC_MESSAGES / "django.mo").open("rb") as mo:
        reader = gettext.GNUTranslations(mo)
    assert reader.gettext("Dead letters") == "死信"
    assert reader.pgettext("action", "replay") == "重放"
    assert reader.ngettext("%(n)s dead letter", "%(n)s dead letters", 5) == "%(n)s 条死信"


def test_django_serves_the_catalogue():
    with translation.override("zh-hans"):
        assert translation.gettext("Dashboard") == "仪表盘"
        assert translation.pgettext("dead letter status", "open") == "未处理"
