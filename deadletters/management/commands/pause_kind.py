from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from deadletters.services.kind_pauses import pause_kind
from reports.errors import InvalidParams


class Command(BaseCommand):
    help = (
        "Pause a report kind: its tasks stay pending (no attempt is used) until `resume_kind`. "
        "Use it while a downstream system is down instead of burning attempts into dead letters."
    )

    def add_arguments(self, parser):
        parser.add_argument("kind")
        parser.add_argument(
            "--reason", default="", help="why (kept in the audit log and shown in the console)"
        )
        parser.add_argument("--actor", default="manage.py", help="who pauses (default %(default)s)")

    def handle(self, *args, kind, reason, actor, verbosity, **options):
        try:
            row, created = pause_kind(kind=kind, actor=actor, reason=reason, source="cli")
        except InvalidParams as exc:
            raise CommandError(str(exc)) from None
        if verbosity >= 1:
            if created:
                self.stdout.write(_("%(kind)s paused") % {"kind": kind})
            else:
                self.stdout.write(
                    _("%(kind)s was already paused by %(who)s at %(when)s UTC")
                    % {"kind": kind, "who": row.paused_by or _("someone"),
                       "when": f"{row.paused_at:%Y-%m-%d %H:%M}"}
                )
