"""manage.py create_api_token NAME [--scope submit --scope read ...]"""

from django.core.management.base import BaseCommand, CommandError

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
            self.stderr.write(f"API token for {name!r}, scopes {' '.join(token.scopes)} (shown once; store it now):")
        self.stdout.write(raw)
