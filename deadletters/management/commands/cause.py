"""`manage.py cause SUBCOMMAND FINGERPRINT ...`: act on one cause, audited as the command line.
One small function per subcommand: `add_<name>` declares its arguments, `<name>` runs it."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from deadletters.selectors.cause_notes import cause_note
from deadletters.services.cause_notes import NOTE_LANGUAGES, cause_note_save
from reports.errors import InvalidParams


def add_note(subparsers) -> None:
    parser = subparsers.add_parser(
        "note", help="show, write or clear a cause's runbook note; its first line and first link "
        "go into every alert of the cause")
    parser.add_argument("fingerprint")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--text", help="the note's text in --language (the other language's is kept)")
    what.add_argument("--clear", action="store_true", help="remove the note's texts and links")
    parser.add_argument("--language", choices=NOTE_LANGUAGES, help="default: ALERT_LANGUAGE")
    parser.add_argument("--link", action="append", dest="links", metavar="URL",
                        help="an http(s) link (owner, dashboard, fix steps), up to 5; replaces the note's")
    parser.add_argument("--actor", default="manage.py", help="who writes it (default %(default)s)")


def note(command, *, fingerprint, text, clear, language, links, actor, **options) -> None:
    current = cause_note(fingerprint)
    if current is None:
        raise CommandError(_("no dead letter ever had the cause %(fp)s") % {"fp": fingerprint})
    if text is not None or clear or links is not None:
        texts = {} if clear else dict(current.texts)
        if text is not None:
            texts[language or settings.ALERT_LANGUAGE] = text
        try:
            cause_note_save(fingerprint=fingerprint, texts=texts, actor=actor, source="cli",
                            links=[] if clear else links or current.links)
        except InvalidParams as exc:
            raise CommandError(str(exc)) from None
        current = cause_note(fingerprint)
    for code, body in current.ordered:
        command.stdout.write(f"[{code}]\n{body}")
    for url in current.links:
        command.stdout.write(url)


SUBCOMMANDS = {"note": (add_note, note)}


class Command(BaseCommand):
    help = "Act on one cause (fingerprint): note."

    def add_arguments(self, parser):
        subparsers = parser.add_subparsers(dest="subcommand", required=True)
        for add, _run in SUBCOMMANDS.values():
            add(subparsers)

    def handle(self, *args, subcommand, **options):
        SUBCOMMANDS[subcommand][1](self, **options)
