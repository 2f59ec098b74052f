"""The dead-letter filter as command-line options, the same filter the console's list and the
API use (deadletters/filters.py): --status, --kind, --error-type, --fingerprint, --q,
--created-from, --created-to, --batch."""

from django.core.management.base import CommandError
from django.utils.translation import gettext as _

from deadletters.filters import FILTER_PARAMS, DeadLetterFilters, InvalidFilter, parse_dead_letter_filters

OPTIONS = [name for name in FILTER_PARAMS if name != "sort"]


def add_filter_options(parser) -> None:
    group = parser.add_argument_group("which dead letters (as the console's list filters them)")
    group.add_argument(
        "--status", default="", help="open (the default), replayed, archived, discarded, superseded or all"
    )
    group.add_argument("--kind", default="", help="a report kind")
    group.add_argument(
        "--error-type", default="", help="the exception type, such as requests.exceptions.ConnectionError"
    )
    group.add_argument(
        "--fingerprint", default="", help="a cause's fingerprint or its first 8+ hex characters"
    )
    group.add_argument(
        "--q", default="", help="the console's search: message text, a task id prefix, #letter-id"
    )
    group.add_argument("--created-from", default="", help="YYYY-MM-DD (UTC), inclusive")
    group.add_argument("--created-to", default="", help="YYYY-MM-DD (UTC), inclusive")
    group.add_argument("--batch", default="", help="a batch id")


def filters_from_options(options: dict) -> DeadLetterFilters:
    given = {name: options.get(name) or "" for name in OPTIONS}
    try:
        return parse_dead_letter_filters({name: value for name, value in given.items() if value})
    except InvalidFilter as exc:
        option = "--" + exc.param.replace("_", "-")
        raise CommandError(
            _("%(option)s: %(message)s") % {"option": option, "message": exc.message}) from None
