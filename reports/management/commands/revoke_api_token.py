"""manage.py revoke_api_token NAME: the token stops working at once."""

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from reports.services.tokens import revoke_api_token


class Command(BaseCommand):
    help = "Revoke a JSON API token by name; its next request is a 401. Its tasks stay as they are."

    def add_arguments(self, parser):
        parser.add_argument("name", help="the token's client name (see list_api_tokens)")

    def handle(self, *args, name, **options):
        if not revoke_api_token(name=name):
            raise CommandError(_("no active API token named %(name)r") % {"name": name})
        self.stdout.write(_("revoked API token %(name)r") % {"name": name})
