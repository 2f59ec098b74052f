"""`manage.py cause`: mark a cause fixed in the next release, mute it until a threshold, unmute
it, show it, write its runbook note; each audited as from the shell, bad input refused naming the
option."""

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from deadletters.models import AuditEntry
from deadletters.selectors.cause_notes import cause_note
from tests.conftest import make_death

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = io.StringIO()
    call_command("cause", *args, stdout=out)
    return out.getvalue()


def test_note_writes_one_language_keeps_the_other_and_clears(settings):
    settings.ALERT_LANGUAGE = "zh-hans"
    fingerprint = make_death().fingerprint
    run("note", fingerprint, "--text", "负责人：支付组", "--link", "https://wiki.example.com/orders")
    shown = run("note", fingerprint, "--text", "Owner: payments", "--language", "en", "--actor", "alice")

    assert "[zh-hans]\n负责人：支付组" in shown and "[en]\nOwner: payments" in shown
    note = cause_note(fingerprint)
    assert note.links == ["https://wiki.example.com/orders"] and note.updated_by == "alice"
    run("note", fingerprint, "--clear")
    assert cause_note(fingerprint).texts == {} and cause_note(fingerprint).links == []
    assert list(AuditEntry.objects.order_by("id").values_list("action", "source")) == [
        ("cause_note", "cli"), ("cause_note", "cli"), ("cause_note_clear", "cli")
    ]


def test_a_bad_link_or_an_unknown_cause_fails_naming_it():
    fingerprint = make_death().fingerprint
    with pytest.raises(CommandError, match="^links: "):
        run("note", fingerprint, "--text", "x", "--link", "javascript:alert(1)")
    with pytest.raises(CommandError, match="0000000000"):
        run("note", "0" * 40, "--text", "x")
    assert not AuditEntry.objects.exists()
def test_the_shell_marks_mutes_unmutes_and_shows_a_cause(settings):
    settings.RELEASE_NAME = "v7"
    cause = make_death(message="ledger locked 'a'").fingerprint
    assert "marked fixed" in run("fixed", cause)
    assert "muted until" in run("mute", cause, "--total", "9", "--reason", "known")
    shown = json.loads(run("show", cause))
    assert shown["fixed"]["state"] == "marked" and shown["mute"]["total"] == 9
    assert "unmuted" in run("unmute", cause)
    assert "no longer marked" in run("fixed", cause, "--undo")
    with pytest.raises(CommandError, match="total"):
        run("mute", cause, "--total", "0")
    assert set(AuditEntry.objects.values_list("source", flat=True)) == {"cli"}
