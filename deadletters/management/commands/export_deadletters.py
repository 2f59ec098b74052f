import csv
import json

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from deadletters.filters import filtered_dead_letters
from deadletters.management.filter_options import add_filter_options, filters_from_options
from reports.kinds.base import neutralise_cell
from reports.kinds.masking import params_for_display

FIELDS = (
    "id", "task_id", "kind", "status", "error_type", "error_message", "fingerprint", "attempts",
    "created_at", "expire_at", "replayed_at", "replayed_by", "archived_at", "discarded_at", "params",
)  # fmt: skip
PROGRESS_EVERY = 10_000


def _row(letter, *, show_params: bool) -> dict:
    row = {name: getattr(letter, name, None) for name in FIELDS}
    row["task_id"] = str(letter.task.public_id)
    row["params"] = params_for_display(letter.params, letter.kind, can_see=show_params)
    for name in ("created_at", "expire_at", "replayed_at", "archived_at", "discarded_at"):
        row[name] = row[name].isoformat() if row[name] else None
    return row


class Command(BaseCommand):
    help = (
        "Export the dead letters a filter matches (the console's list filter; open ones by default) "
        "to CSV or JSON Lines, in id order, tracebacks left out and params masked unless --show-params "
        "(a kind's sensitive params stay masked). Progress goes to stderr."
    )

    def add_arguments(self, parser):
        parser.add_argument("--format", choices=("csv", "jsonl"), default="jsonl")
        parser.add_argument("--output", "-o", default="-", help="a file to write (default: stdout)")
        parser.add_argument("--show-params", action="store_true",
                            help="write the params' values (default: their keys with masked values)")
        add_filter_options(parser)

    def handle(self, *args, format, output, verbosity, show_params, **options):
        letters = (
            filtered_dead_letters(filters_from_options(options))
            .select_related("task")
            .defer("traceback")
            .order_by("pk")
        )
        try:
            stream = self.stdout if output == "-" else open(output, "w", newline="", encoding="utf-8")
        except OSError as exc:
            raise CommandError(_("cannot write %(file)s: %(why)s") % {"file": output, "why": exc}) from None
        written = 0
        try:
            writer = csv.DictWriter(stream, fieldnames=FIELDS) if format == "csv" else None
            if writer:
                writer.writeheader()
            for letter in letters.iterator(chunk_size=2000):
                row = _row(letter, show_params=show_params)
                if writer:
                    # Messages and params come from clients and sources: no cell a spreadsheet would run.
                    row["params"] = json.dumps(row["params"], ensure_ascii=False)
                    writer.writerow({name: neutralise_cell(value) for name, value in row.items()})
                else:
                    stream.write(json.dumps(row, ensure_ascii=False) + "\n")
                written += 1
                if verbosity >= 1 and written % PROGRESS_EVERY == 0:
                    self.stderr.write(_("%(n)d exported...") % {"n": written})
        except OSError as exc:
            raise CommandError(
                _("writing %(file)s failed after %(n)d dead letters: %(why)s")
                % {"file": output, "n": written, "why": exc}
            ) from None
        finally:
            if stream is not self.stdout:
                stream.close()
        if verbosity >= 1:
            if output == "-":
                done = ngettext("%(n)d dead letter exported", "%(n)d dead letters exported", written)
            else:
                done = ngettext("%(n)d dead letter exported to %(file)s",
                                "%(n)d dead letters exported to %(file)s", written)
            self.stderr.write(done % {"n": written, "file": output})
