"""manage.py revoke_api_token NAME: the token stops working at once."""

from django.core.management.base import BaseCommand, CommandError

from reports.services.tokens import revoke_api_token


class Command(BaseCommand):
    help = "Revoke a JSON API token by name; its next request is a 401. Its tasks stay as they are."

    def add_arguments(self, parser):
        parser.add_argument("name", help="the token's client name (see list_api_tokens)")

    def handle(self, *args, name, **options):
        if not revoke_api_token(name=name):
            raise CommandError(f"no active API token named {name!r}")
        self.stdout.write(f"revoked API token {name!r}")
