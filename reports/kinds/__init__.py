"""Report kinds. Adding one: a module with a `ReportKind` subclass, plus one line in KINDS."""

from reports.kinds.base import ReportKind
from reports.kinds.http_export import HttpExport
from reports.kinds.probe import Probe
from reports.kinds.sales_summary import SalesSummary

KINDS: dict[str, ReportKind] = {kind.name: kind for kind in (SalesSummary(), HttpExport(), Probe())}


def get_kind(name: str) -> ReportKind | None:
    return KINDS.get(name)
