"""Text as it may appear in an alert: values a client or an error supplied made inert (no markup,
no link a chat client would make of them, nothing invisible), and times in the team's zone."""

import re
import unicodedata
from datetime import datetime
from zoneinfo import ZoneInfo

from django.conf import settings

LINE_MAX = 160
TITLE_MAX = 120

# Characters that make markdown structure (links, images, headings, code, emphasis, quotes, HTML)
# swapped for look-alikes that render as themselves.
_MARKDOWN_NEUTRAL = str.maketrans({"`": "'", "[": "(", "]": ")", "#": "＃", "*": "＊", "<": "＜", ">": "＞"})
# Control characters, and format characters: bidi overrides and isolates, zero-width ones.
_INVISIBLE = {"Cc", "Cf", "Cs", "Co"}
# Top-level domains a chat client links by themselves when it sees name.tld (no scheme needed).
_TLDS = (
    "com|net|org|cn|io|dev|app|info|biz|co|me|ai|xyz|top|site|online|tech|cloud|link|ru|uk|de|jp|us|"
    "edu|gov|mil|int|hk|tw|sg|kr|fr|in|tv|cc|ly|gl|to|so|sh|im|vip|shop|club|ink|work|wang|xin"
)
_LINKABLE = re.compile(
    r"(?i)\b(?P<scheme>[a-z][a-z0-9+.-]*):[\\/]{1,2}(?P<host>[^\s/\\?#]*)"  # https://x, https:\\x
    r"|(?P<mail>[\w.+-]+@[\w-]+(?:\.[\w-]+)+)"  # user@host.tld
    r"|\b(?P<domain>www\.[^\s/?#]+|(?:[a-z0-9-]+\.)+(?:" + _TLDS + r"))\b(?![.\w-])"  # www.x, x.com
    r"|\b(?P<ip>\d{1,3}(?:\.\d{1,3}){3})\b"  # 10.0.0.1
)


def one_line(text, limit: int = LINE_MAX) -> str:
    line = " ".join(str(text if text is not None else "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _defang(match: re.Match) -> str:
    """hxxps://evil(.)example, ops(at)evil(.)example: shown to the operator, linked by nothing."""
    if match.group("scheme"):
        scheme, host = match.group("scheme"), match.group("host").replace(".", "(.)")
        if scheme.lower() in ("http", "https"):
            return f"{scheme[0]}xx{scheme[3:]}://{host}"
        return f"{scheme}(:)//{host}"
    if match.group("mail"):
        return match.group("mail").replace("@", "(at)").replace(".", "(.)")
    return match.group(0).replace(".", "(.)")


def visible(text, limit: int | None = None) -> str:
    """Text without control or invisible characters (white space kept), trimmed, cut to `limit`:
    operator input (a reason, a release name) as it is stored."""
    text = "".join(
        c
        for c in str(text if text is not None else "")
        if c.isspace() or unicodedata.category(c) not in _INVISIBLE
    )
    return text.strip()[:limit]


def neutral(text, limit: int = LINE_MAX) -> str:
    """Any user-supplied value (kind, error, message, batch name...) as it may appear in an alert:
    one line, cut to `limit`, unable to open a paragraph, quote, heading, link or tag, with no link
    a chat client would make of a URL, domain, address or IP, and nothing invisible."""
    text = visible(text)
    return one_line(_LINKABLE.sub(_defang, one_line(text, limit * 2)), limit).translate(_MARKDOWN_NEUTRAL)


def fit_text(text: str, limit: int) -> str:
    """The text cut at a line boundary to at most `limit` characters."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 2]
    return cut[: cut.rfind("\n") + 1 or len(cut)] + "…"


def format_time(value: datetime | str | None) -> str:
    """A time in the team's zone (TIME_ZONE), with the zone's name: 2026-11-27 17:30:05 Asia/Shanghai."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if value is None:
        return "-"
    return value.astimezone(ZoneInfo(settings.TIME_ZONE)).strftime(f"%Y-%m-%d %H:%M:%S {settings.TIME_ZONE}")
