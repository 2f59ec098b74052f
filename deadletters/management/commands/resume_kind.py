from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from deadletters.services.kind_pauses import resume_kind
from reports.errors import InvalidParams
from reports.services.pausing import KindNotPaused


class Command(BaseCommand):
    help = "Resume a paused report kind and enqueue its waiting tasks now."

    def add_arguments(self, parser):
        parser.add_argument("kind")
        parser.add_argument("--actor", default="manage.py", help="who resumes (default %(default)s)")

    def handle(self, *args, kind, actor, verbosity, **options):
        try:
            waiting = resume_kind(kind=kind, actor=actor, source="cli")
        except InvalidParams as exc:
            raise CommandError(str(exc)) from None
        except KindNotPaused:
            raise CommandError(_("%(kind)s is not paused") % {"kind": kind}) from None
        if verbosity >= 1:
            self.stdout.write(
                ngettext(
                    "%(kind)s resumed; %(n)d waiting task enqueued",
                    "%(kind)s resumed; %(n)d waiting tasks enqueued", waiting
                )
                % {"kind": kind, "n": waiting}
            )
