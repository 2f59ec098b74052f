"""A cause's runbook note, as an operator action (the console, the API and `manage.py cause note`
call this): a short text in English and/or Chinese and up to LINKS_MAX links (owner, dashboard,
fix steps) on one fingerprint, audited. Its first line and first link go into every card of the
cause (deadletters.alerts.render), in ALERT_LANGUAGE when the note has both languages.

The note is hostile input: each text is bounded and loses its control and invisible characters
here, and every channel shows its line through deadletters.alerts.text.neutral. A link is refused
unless it is an http(s) URL with a plain host (no user, no password); the characters a markdown
link target would read (brackets, quotes, spaces) are percent-encoded."""

import re
from urllib.parse import quote

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from config.languages import LANGUAGES
from deadletters.alerts.text import visible
from deadletters.audit import record_audit
from deadletters.models import CauseState
from reports.errors import InvalidParams

TEXT_MAX = 2000
LINKS_MAX = 5
LINK_MAX = 500
NOTE_LANGUAGES = tuple(code for code, _name in LANGUAGES)
FINGERPRINT = re.compile(r"[0-9a-f]{40}\Z")
# An http(s) URL with a plain host name (no user or password), no space; as the OpenAPI document states.
LINK_PATTERN = r"^([Hh][Tt][Tt][Pp][Ss]?)://([A-Za-z0-9.-]+(?::[0-9]{1,5})?)([/?#]\S*)?$"
_LINK = re.compile(LINK_PATTERN.removesuffix("$") + r"\Z")
_URL_SAFE = "/?#&=+%:@!$,;~-._"  # kept in a link's path and query; anything else is percent-encoded


def _text(value, field: str) -> str:
    if not isinstance(value, str) or len(value) > TEXT_MAX:
        raise InvalidParams(field, _("a note is text of at most %(n)d characters") % {"n": TEXT_MAX})
    return "\n".join(" ".join(line.split()) for line in visible(value).splitlines()).strip()


def _link(url) -> str:
    match = _LINK.match(url) if isinstance(url, str) and len(url) <= LINK_MAX else None
    if not match:
        raise InvalidParams("links", _("a link is an http:// or https:// URL with a host name, "
                                        "without spaces, of at most %(n)d characters") % {"n": LINK_MAX})
    scheme, host, rest = match.groups()
    return f"{scheme.lower()}://{host}{quote(rest or '', safe=_URL_SAFE)}"


def clean_note(texts, links) -> tuple[dict[str, str], list[str]]:
    """(texts by language, links) as stored, or InvalidParams naming the field (`text.en`, `links`...)."""
    if not isinstance(texts, dict) or set(texts) - set(NOTE_LANGUAGES):
        raise InvalidParams("text", _("give the note's text by language: %(codes)s")
                             % {"codes": ", ".join(NOTE_LANGUAGES)})
    if not isinstance(links, list) or len(links) > LINKS_MAX:
        raise InvalidParams("links", _("give at most %(n)d links") % {"n": LINKS_MAX})
    cleaned = {code: _text(texts[code], f"text.{code}") for code in NOTE_LANGUAGES if code in texts}
    return {code: text for code, text in cleaned.items() if text}, [_link(url) for url in links]


def cause_note_save(
    *, fingerprint: str, texts: dict, links: list, actor: str, source: str = "console",
    ip_address: str | None = None,
) -> bool:
    """Write a cause's note (an empty one clears it). Returns whether the cause now has a note;
    CauseState.DoesNotExist for a fingerprint no letter ever had."""
    if not isinstance(fingerprint, str) or not FINGERPRINT.match(fingerprint):
        raise InvalidParams("fingerprint", _("a fingerprint is 40 hexadecimal characters"))
    texts, links = clean_note(texts, links)
    with transaction.atomic():
        if not CauseState.objects.filter(fingerprint=fingerprint).update(
            note_text=texts, note_links=links, note_by=actor[:150], note_at=timezone.now()
        ):
            raise CauseState.DoesNotExist(fingerprint)
        record_audit(
            action="cause_note" if texts or links else "cause_note_clear",
            actor=actor,
            source=source,
            ip_address=ip_address,
            item_count=0,
            details={"fingerprint": fingerprint, "text": texts, "links": links},
        )
    return bool(texts or links)
