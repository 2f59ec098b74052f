"""`manage.py cause`: mark a cause fixed in the next release, mute it until a threshold, unmute
it, show it; each audited as from the shell, bad input refused naming the option."""

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from deadletters.models import AuditEntry
from tests.conftest import make_death

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = io.StringIO()
    call_command("cause", *args, stdout=out)
    return out.getvalue()


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
