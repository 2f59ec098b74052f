from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from deadletters.services.kind_pauses import set_breaker
from reports.errors import InvalidParams
from reports.services.breakers import ACTIONS, BOUNDS


class Command(BaseCommand):
    help = (
        "A report kind's circuit breaker: open (pause the kind, probe its upstream, resume after passing "
        "probes), hold (pause it, no probes) or close (resume now); and its thresholds."
    )

    def add_arguments(self, parser):
        parser.add_argument("kind")
        parser.add_argument("action", nargs="?", choices=ACTIONS)
        for name, (low, high) in BOUNDS.items():
            parser.add_argument(f"--{name.replace('_', '-')}", dest=name, help=f"{low} to {high}")
        parser.add_argument("--reason", default="", help="why (kept in the audit log)")
        parser.add_argument("--actor", default="manage.py", help="who (default %(default)s)")

    def handle(self, *args, kind, action, reason, actor, verbosity, **options):
        thresholds = {name: options[name] for name in BOUNDS if options.get(name) is not None}
        if action is None and not thresholds:
            raise CommandError(_("say what to do: open, hold or close, or a threshold to change"))
        try:
            row, changed = set_breaker(kind=kind, action=action, actor=actor, thresholds=thresholds,
                                       reason=reason, source="cli")
        except InvalidParams as exc:
            raise CommandError(f"{exc.field}: {exc.message}") from None
        if verbosity >= 1:
            self.stdout.write(
                _("breaker of %(kind)s: %(state)s (%(changed)s); opens after %(n)s failures within %(s)s s, "
                  "closes after %(p)s passing probes")
                % {"kind": kind, "state": row.state, "changed": _("changed") if changed else _("unchanged"),
                   "n": row.failures_to_open, "s": row.window_seconds, "p": row.probes_to_close}
            )
