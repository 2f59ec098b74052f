"""What a console page shows a person, and the English catalogue it must not show in Chinese.

Visible text is every text node outside <script>/<style>, plus the attributes a person reads or
hears (title, aria-label, placeholder, alt). User data (error messages, params, ids, kinds,
usernames) sits in marked elements (class mono, msg, error-message, ...; <code>, <pre>) that are
left out, and any other known data value is cut out by the caller.
"""

import re
from html.parser import HTMLParser
from pathlib import Path

import polib

CATALOGUE = Path(__file__).resolve().parents[2] / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
# Elements holding user data or code, never console wording.
DATA_CLASSES = {
    "mono",
    "msg",
    "error-message",
    "error-head",
    "traceback",
    "json",
    "params",
    "frame-code",
    "frame-path",
    "who",
    "paused-reason",
}
DATA_TAGS = {"code", "pre", "script", "style"}
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
READ_ATTRIBUTES = ("title", "aria-label", "placeholder", "alt")
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")
PLACEHOLDER = re.compile(r"%\(\w+\)[sd]|%[sd]|<[^>]+>|&\w+;")


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[bool] = []  # per open element: is its subtree left out?
        self.texts: list[str] = []

    def _skipped(self) -> bool:
        return bool(self.stack) and self.stack[-1]

    def _open(self, tag, attrs) -> bool:
        attrs = dict(attrs)
        classes = set((attrs.get("class") or "").split())
        # An element in another language on purpose (the language switch names each language in itself).
        skip = self._skipped() or tag in DATA_TAGS or bool(classes & DATA_CLASSES) or "lang" in attrs and tag != "html"
        if not skip:
            self.texts.extend(attrs[name] for name in READ_ATTRIBUTES if attrs.get(name))
        return skip

    def handle_starttag(self, tag, attrs):
        skip = self._open(tag, attrs)
        if tag not in VOID_TAGS:
            self.stack.append(skip)

    def handle_startendtag(self, tag, attrs):
        self._open(tag, attrs)

    def handle_endtag(self, tag):
        if tag not in VOID_TAGS and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if not self._skipped() and data.strip():
            self.texts.append(data)


def visible_texts(html: str) -> list[str]:
    collector = _Collector()
    collector.feed(html)
    collector.close()
    return [" ".join(text.split()) for text in collector.texts]


def _fragments(msgid: str) -> list[str]:
    """The literal English pieces of a msgid: what an untranslated string would show."""
    pieces = []
    for piece in PLACEHOLDER.split(msgid):
        words = re.findall(r"[A-Za-z][A-Za-z'’-]*", piece)
        # One- and two-letter pieces ("s", "of") are too common in data to mean anything.
        if words and sum(len(word) for word in words) >= 3:
            pieces.append(" ".join(piece.split()).strip(" .,:;()…→←«»·+—-"))
    return [piece for piece in pieces if piece]


def english_fragments() -> re.Pattern:
    """Fragments of every msgid, except those the Chinese text itself carries (API, HTTP JSON...)."""
    catalogue = polib.pofile(str(CATALOGUE))
    translations = " ".join(
        entry.msgstr or " ".join(entry.msgstr_plural.values()) for entry in catalogue if entry.msgid
    )
    fragments = set()
    for entry in catalogue:
        for msgid in filter(None, (entry.msgid, entry.msgid_plural)):
            fragments.update(f for f in _fragments(msgid) if f not in translations)
    # One pattern, longest first, so a page is scanned once rather than once per msgid.
    alternatives = "|".join(re.escape(f) for f in sorted(fragments, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z])(?:{alternatives})(?![A-Za-z])")


def untranslated(texts: list[str], fragments: re.Pattern, data: list[str]) -> list[tuple[str, str]]:
    """(text, fragment) for every visible text that still says a catalogue msgid in English."""
    found = []
    for text in dict.fromkeys(texts):
        for value in sorted(filter(None, data), key=len, reverse=True):
            text = text.replace(value, " ")
        found += [(text, fragment) for fragment in fragments.findall(text)]
    return found


def with_cjk(texts: list[str]) -> list[str]:
    return [text for text in texts if CJK.search(text)]
