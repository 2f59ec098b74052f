"""Absolute links into the console (CONSOLE_BASE_URL + path), for the places that leave the
site: DingTalk alerts and the JSON API. Pages are addressed by path, not reverse(): a sender
process need not load the console's URLconf, and a link is stable across its refactors."""

from urllib.parse import quote

from django.conf import settings


def _base() -> str:
    return settings.CONSOLE_BASE_URL.rstrip("/")


def dead_letter_url(dead_letter_id: int) -> str:
    return f"{_base()}/console/dead-letters/{dead_letter_id}/"


def replay_confirm_url(dead_letter_id: int) -> str:
    return f"{_base()}/console/dead-letters/{dead_letter_id}/replay/"


def dead_letter_list_url() -> str:
    return f"{_base()}/console/dead-letters/"


def fingerprint_url(fingerprint: str) -> str:
    return f"{dead_letter_list_url()}?fingerprint={quote(fingerprint, safe='')}"


def batch_url(batch_public_id) -> str:
    return f"{dead_letter_list_url()}?batch={quote(str(batch_public_id), safe='')}"


def bulk_url(bulk_public_id) -> str:
    return f"{_base()}/console/bulk/{quote(str(bulk_public_id), safe='')}/"


def cause_replay_preview_url(fingerprint: str) -> str:
    """The bulk preview of replaying every open letter of one cause: a page to confirm on (GET)."""
    return f"{_base()}/console/bulk/preview/?action=replay&fingerprint={quote(fingerprint, safe='')}"


def kind_url(kind: str) -> str:
    return f"{_base()}/console/kinds/{quote(kind, safe='')}/"
