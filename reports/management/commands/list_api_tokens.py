"""manage.py list_api_tokens: every token's name, prefix, scopes, dates and state; never a secret."""

from django.core.management.base import BaseCommand

from reports.selectors import api_tokens


def _when(moment) -> str:
    return f"{moment:%Y-%m-%d %H:%M}" if moment else "-"


class Command(BaseCommand):
    help = ("List JSON API tokens: name, prefix, scopes, created, last used, revoked "
            "(the secret is never stored).")

    def handle(self, *args, **options):
        rows = [("NAME", "PREFIX", "SCOPES", "CREATED", "LAST USED", "REVOKED")]
        rows += [
            (
                token.name,
                f"{token.prefix}...",
                ",".join(token.scopes) or "-",
                _when(token.created_at),
                _when(token.last_used_at),
                _when(token.revoked_at),
            )
            for token in api_tokens()
        ]
        widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
        for row in rows:
            line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
            self.stdout.write(line.rstrip())
