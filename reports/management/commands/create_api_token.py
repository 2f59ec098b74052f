"""manage.py create_api_token NAME | --revoke NAME | --list"""

from django.core.management.base import BaseCommand, CommandError

from reports.models import ApiToken
from reports.tokens import TokenNameTaken, create_api_token, revoke_api_token


class Command(BaseCommand):
    help = "Create a JSON API token (printed once, stored hashed), revoke one, or list them."

    def add_arguments(self, parser):
        parser.add_argument("name", nargs="?", help="client name for the new token")
        parser.add_argument("--revoke", metavar="NAME", help="revoke the token with this name")
        parser.add_argument("--list", action="store_true", help="list tokens (never their secrets)")

    def handle(self, *args, name=None, revoke=None, list=False, **options):
        chosen = sum(bool(x) for x in (name, revoke, list))
        if chosen != 1:
            raise CommandError("give exactly one of: NAME, --revoke NAME, --list")
        if list:
            for token in ApiToken.objects.order_by("name"):
                state = f"revoked {token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked_at else "active"
                used = f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "never"
                self.stdout.write(f"{token.name}\t{token.prefix}...\t{state}\tlast used {used}")
            return
        if revoke:
            if not revoke_api_token(name=revoke):
                raise CommandError(f"no active API token named {revoke!r}")
            self.stdout.write(f"revoked API token {revoke!r}")
            return
        try:
            _, raw = create_api_token(name=name)
        except (TokenNameTaken, ValueError) as exc:
            raise CommandError(str(exc)) from None
        if options["verbosity"] >= 1:
            self.stderr.write(f"API token for {name!r} (shown once; store it now):")
        self.stdout.write(raw)
