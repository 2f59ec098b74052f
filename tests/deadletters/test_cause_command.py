"""`manage.py cause note`: write one language's text (the other kept), replace the links, clear;
audited as the command line; a bad link or an unknown cause fails naming it."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from deadletters.models import AuditEntry
from deadletters.selectors.cause_notes import cause_note
from tests.conftest import make_death

pytestmark = pytest.mark.django_db


def cause(*args) -> str:
    out = io.StringIO()
    call_command("cause", *args, stdout=out)
    return out.getvalue()


def test_note_writes_one_language_keeps_the_other_and_clears(settings):
    settings.ALERT_LANGUAGE = "zh-hans"
    fingerprint = make_death().fingerprint
    cause("note", fingerprint, "--text", "负责人：支付组", "--link", "https://wiki.example.com/orders")
    shown = cause("note", fingerprint, "--text", "Owner: payments", "--language", "en", "--actor", "alice")

    assert "[zh-hans]\n负责人：支付组" in shown and "[en]\nOwner: payments" in shown
    note = cause_note(fingerprint)
    assert note.links == ["https://wiki.example.com/orders"] and note.updated_by == "alice"
    cause("note", fingerprint, "--clear")
    assert cause_note(fingerprint).texts == {} and cause_note(fingerprint).links == []
    assert list(AuditEntry.objects.order_by("id").values_list("action", "source")) == [
        ("cause_note", "cli"), ("cause_note", "cli"), ("cause_note_clear", "cli")
    ]


def test_a_bad_link_or_an_unknown_cause_fails_naming_it():
    fingerprint = make_death().fingerprint
    with pytest.raises(CommandError, match="^links: "):
        cause("note", fingerprint, "--text", "x", "--link", "javascript:alert(1)")
    with pytest.raises(CommandError, match="0000000000"):
        cause("note", "0" * 40, "--text", "x")
    assert not AuditEntry.objects.exists()
