"""manage.py create_api_token NAME [--scope submit --scope read ...]"""

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from reports.models import ApiScope
from reports.services.tokens import DEFAULT_SCOPES, TokenNameTaken, create_api_token


class Command(BaseCommand):
    help = (
        "Create a JSON API token for one client (printed once, stored hashed). Scopes: "
        f"{', '.join(ApiScope.values)}; default {' '.join(DEFAULT_SCOPES)}."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="client name for the new token")
        parser.add_argument(
            "--scope",
            action="append",
            dest="scopes",
            choices=ApiScope.values,
            help=f"repeat for several; default: {' '.join(DEFAULT_SCOPES)}",
        )

    def handle(self, *args, name, scopes=None, **options):
        try:
            token, raw = create_api_token(name=name, scopes=scopes or DEFAULT_SCOPES)
        except (TokenNameTaken, ValueError) as exc:
            raise CommandError(str(exc)) from None
        if options["verbosity"] >= 1:
            self.stderr.write(
                _("API token for %(name)r, scopes %(scopes)s (shown once; store it now):")
                % {"name": name, "scopes": " ".join(token.scopes)}
            )
        self.stdout.write(raw)
