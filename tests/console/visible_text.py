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
}
DATA_TAGS = {"code", "pre", "script", "style"}
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
             "wbr"}
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
        skip = (self._skipped() or tag in DATA_TAGS or bool(classes & DATA_CLASSES)
                or "lang" in attrs and tag != "html")
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


# Where a page says what went wrong or what was done: the messages after an action, alerts and
# notices, a refusal's page, a form's errors. What the services raise ends up here.
MESSAGE_CLASSES = {"messages", "alert", "notice", "conflict", "field-error", "error-list", "errorlist"}
# Code-like words that read the same in both languages: acronyms, setting names, a date's format.
_LATIN_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)*")
# What a person typed, quoted back as Python's repr ('yesterday' is not a date).
_QUOTED = re.compile(r"'[^'\n]{0,200}'")
_HEX_OR_UUID = re.compile(r"\b[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}\b|\b[0-9a-f]{8,40}\b")


class _MessageCollector(_Collector):
    """Visible text inside message areas only (user data still left out)."""

    def __init__(self):
        super().__init__()
        self.areas: list[bool] = []  # per open element: inside a message area?

    def _in_area(self) -> bool:
        return bool(self.areas) and self.areas[-1]

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        classes = set((found.get("class") or "").split())
        inside = self._in_area() or bool(classes & MESSAGE_CLASSES) or found.get("role") == "alert"
        before = len(self.texts)
        super().handle_starttag(tag, attrs)
        if not inside:
            del self.texts[before:]
        if tag not in VOID_TAGS:
            self.areas.append(inside)

    def handle_startendtag(self, tag, attrs):
        before = len(self.texts)
        super().handle_startendtag(tag, attrs)
        if not self._in_area():
            del self.texts[before:]

    def handle_endtag(self, tag):
        super().handle_endtag(tag)
        if tag not in VOID_TAGS and self.areas:
            self.areas.pop()

    def handle_data(self, data):
        if self._in_area():
            super().handle_data(data)


def message_texts(html: str) -> list[str]:
    collector = _MessageCollector()
    collector.feed(html)
    collector.close()
    return [" ".join(text.split()) for text in collector.texts]


def english_words(texts: list[str], data: list[str]) -> list[tuple[str, str]]:
    """(text, word) for every English word left in a Chinese message: any word with a lowercase
    letter, once user data (the given values, what was typed quoted back, ids, hex) is cut out. Not only
    the catalogue's msgids: a message a service raised without gettext is caught too."""
    found = []
    for text in dict.fromkeys(texts):
        for value in sorted(filter(None, data), key=len, reverse=True):
            text = text.replace(value, " ")
        text = _HEX_OR_UUID.sub(" ", _QUOTED.sub(" ", text))
        found += [(text, word) for word in _LATIN_WORD.findall(text) if len(word) >= 2 and not word.isupper()]
    return found
