"""`manage.py cause SUBCOMMAND FINGERPRINT ...`: act on one cause, audited as the command line.
One small function per subcommand; `subcommand` declares the arguments every one shares."""

import argparse
import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from deadletters.alerts.snooze import SnoozeError, lift_snooze, snooze_alerts
from deadletters.selectors.cause_notes import cause_note
from deadletters.selectors.causes import cause_lifecycles
from deadletters.services.cause_lifecycle import CauseError, CauseNotFound, cause_mark_fixed
from deadletters.services.cause_notes import FINGERPRINT, NOTE_LANGUAGES, cause_note_save
from reports.errors import InvalidParams


def fingerprint(value: str) -> str:
    if not FINGERPRINT.match(value):
        raise argparse.ArgumentTypeError("a fingerprint is 40 hexadecimal characters")
    return value


def subcommand(commands, name: str, handler, about: str):
    """A subcommand of one cause: `handler(command, options)` does it."""
    sub = commands.add_parser(name, help=about)
    sub.set_defaults(handler=handler)
    sub.add_argument("fingerprint", type=fingerprint, help="the cause: 40 hexadecimal digits")
    sub.add_argument("--actor", default="manage.py", help="who acts (default %(default)s)")
    return sub


def fixed(command, options) -> None:
    try:
        _cause, changed = cause_mark_fixed(
            fingerprint=options["fingerprint"], actor=options["actor"], undo=options["undo"], source="cli"
        )
    except CauseNotFound:
        raise CommandError(_("no letter has died of this cause")) from None
    except CauseError as exc:
        raise CommandError(f"{exc.field}: {exc}") from None
    if options["undo"]:
        command.stdout.write(_("no longer marked fixed") if changed else _("was not marked fixed"))
    else:
        command.stdout.write(
            _("marked fixed in the next release") if changed else _("was marked fixed already")
        )


def mute(command, options) -> None:
    try:
        snooze = snooze_alerts(
            fingerprint=options["fingerprint"], per_minute=options["per_minute"], total=options["total"],
            reason=options["reason"], actor=options["actor"], source="cli",
        )
    except SnoozeError as exc:
        raise CommandError(f"{exc.field}: {exc}") from None
    command.stdout.write(_("muted until it crosses its threshold (snooze %(id)s)") % {"id": snooze.pk})


def unmute(command, options) -> None:
    mute = cause_lifecycles([options["fingerprint"]])[options["fingerprint"]]["mute"]
    if mute is None or lift_snooze(snooze_id=mute.pk, actor=options["actor"], source="cli") is None:
        raise CommandError(_("this cause has no mute until a threshold"))
    command.stdout.write(_("unmuted: the summary goes out with the next send pass"))


def show(command, options) -> None:
    found = cause_lifecycles([options["fingerprint"]])[options["fingerprint"]]
    mute = found["mute"]
    found["mute"] = mute and {"id": mute.pk, "per_minute": mute.per_minute, "total": mute.total,
                              "deaths": mute.deaths, "reason": mute.reason, "by": mute.created_by}
    shown = {"fingerprint": options["fingerprint"], **found}
    command.stdout.write(json.dumps(shown, indent=2, ensure_ascii=False))


def note(command, options) -> None:
    fingerprint, text, clear, links = (options[k] for k in ("fingerprint", "text", "clear", "links"))
    current = cause_note(fingerprint)
    if current is None:
        raise CommandError(_("no dead letter ever had the cause %(fp)s") % {"fp": fingerprint})
    if text is not None or clear or links is not None:
        texts = {} if clear else dict(current.texts)
        if text is not None:
            texts[options["language"] or settings.ALERT_LANGUAGE] = text
        try:
            cause_note_save(fingerprint=fingerprint, texts=texts, actor=options["actor"], source="cli",
                            links=[] if clear else links or current.links)
        except InvalidParams as exc:
            raise CommandError(str(exc)) from None
        current = cause_note(fingerprint)
    for code, body in current.ordered:
        command.stdout.write(f"[{code}]\n{body}")
    for url in current.links:
        command.stdout.write(url)


class Command(BaseCommand):
    help = (
        "One cause (fingerprint): mark it fixed in the next release (its open letters are replayed with a "
        "canary once another RELEASE_NAME runs; --undo unmarks it), mute its alerts until it dies more than "
        "N times a minute or N times in all, unmute it, show its releases, mark and mute, or show or write "
        "its runbook note."
    )

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="subcommand", required=True)
        subcommand(commands, "fixed", fixed, "mark the cause fixed in the next release").add_argument(
            "--undo", action="store_true", help="unmark it"
        )
        muting = subcommand(commands, "mute", mute, "mute its alerts until a threshold")
        threshold = muting.add_mutually_exclusive_group(required=True)
        threshold.add_argument(
            "--per-minute", type=int, metavar="N", help="until more than N deaths a minute"
        )
        threshold.add_argument("--total", type=int, metavar="N", help="until more than N deaths in all")
        muting.add_argument("--reason", default="", help="why (kept in the audit log)")
        subcommand(commands, "unmute", unmute, "lift its mute until a threshold")
        subcommand(commands, "show", show, "its releases, mark and mute, as JSON")
        noting = subcommand(commands, "note", note, "show, write or clear its runbook note; its first line "
                            "and first link go into every alert of the cause")
        what = noting.add_mutually_exclusive_group()
        what.add_argument("--text", help="the note's text in --language (the other language's is kept)")
        what.add_argument("--clear", action="store_true", help="remove the note's texts and links")
        noting.add_argument("--language", choices=NOTE_LANGUAGES, help="default: ALERT_LANGUAGE")
        noting.add_argument("--link", action="append", dest="links", metavar="URL",
                            help="an http(s) link (owner, dashboard, fix steps), up to 5; replaces them")

    def handle(self, *args, handler, **options):
        handler(self, options)
