"""Fetches JSON over HTTP and tabulates it; its network errors are the natural transient failures.
What it may fetch, and how, is reports/outbound.py's policy, checked at submit and again before
every fetch (a replay runs under today's allowlist, not the one the task was submitted under)."""

import json

from django.conf import settings
from django.utils.translation import gettext, gettext_noop

from reports import outbound
from reports.errors import InvalidParams, PermanentError
from reports.kinds.base import Param, ReportKind, RunContext, choice, reject_unknown, write_table


class HttpExport(ReportKind):
    name = "http_export"
    title = gettext_noop("HTTP JSON export")
    default_priority = "low"
    # The declaration the console and the OpenAPI document show; validate() below is this kind's own.
    params = (
        Param(
            "url",
            "string",
            default=lambda: settings.HTTP_EXPORT_URL or None,
            max_length=2000,
            description=gettext_noop(
                "http(s) URL of a JSON answer; only host:port pairs in HTTP_EXPORT_ALLOWED_HOSTS, "
                "public addresses unless the allowlist names the address (others: 422)"
            ),
            schema_extra=lambda: {"format": "uri"},
        ),
        Param("format", "string", default="csv", choices=("csv", "xlsx"), description=gettext_noop("file format")),
        Param(
            "records_path",
            "string",
            default="",
            max_length=200,
            description=gettext_noop(
                "dotted path to the list of records in the answer (e.g. data.items); empty: the answer "
                "itself, or the one list of objects it holds"
            ),
        ),
    )
    def validate(self, params):
        reject_unknown(params, {"url", "format", "records_path"})
        url = params.get("url", settings.HTTP_EXPORT_URL)
        if not isinstance(url, str) or len(url) > 2000:
            raise InvalidParams("url", gettext("must be a URL string"))
        if not url:
            raise InvalidParams("url", gettext("is required (no default source, HTTP_EXPORT_URL, is configured)"))
        # A name that does not resolve during the submit is checked again before the fetch.
        checked = self._check(url, must_resolve=False)
        records_path = params.get("records_path", "")
        if not isinstance(records_path, str) or len(records_path) > 200:
            raise InvalidParams("records_path", gettext("must be a dotted path string"))
        return {
            "url": checked.target.url,
            "format": choice(params, "format", ("csv", "xlsx"), "csv"),
            "records_path": records_path,
        }

    def _check(self, url: str, *, must_resolve: bool) -> outbound.CheckedUrl:
        try:
            return outbound.check_url(
                url,
                allowed_hosts=settings.HTTP_EXPORT_ALLOWED_HOSTS,
                must_resolve=must_resolve,
            )
        except outbound.UrlRefused as exc:
            raise InvalidParams("url", str(exc)) from None

    def generate(self, params, ctx: RunContext):
        body = outbound.fetch(
            self._check(params["url"], must_resolve=True),
            timeout=settings.HTTP_EXPORT_TIMEOUT,
            deadline=settings.HTTP_EXPORT_DEADLINE,
            max_bytes=settings.HTTP_EXPORT_MAX_BYTES,
        )
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: nesting deeper than Python's stack
            raise PermanentError("the source did not answer JSON") from None
        if params["records_path"]:
            for key in params["records_path"].split("."):
                if not isinstance(data, dict) or key not in data:
                    raise PermanentError(f"records_path: {key!r} not found in the response")
                data = data[key]
        else:
            data = _the_one_record_list(data)
        if not _is_record_list(data):
            raise PermanentError("the response is not a list of objects")
        columns: list[str] = []
        for item in data:
            columns.extend(key for key in item if key not in columns)
        rows = ([_cell(item.get(column, "")) for column in columns] for item in data)
        return write_table(ctx.output_dir / "export", params["format"], columns, rows)


def _is_record_list(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _the_one_record_list(data):
    """With no records_path: the answer itself when it is a list, else the shallowest list of objects
    inside it when there is exactly one (the demo source's `data.items`, most APIs' envelopes)."""
    level = [("", data)]
    while level and not any(_is_record_list(value) for _, value in level):
        level = [
            (f"{path}.{key}".lstrip("."), value)
            for path, holder in level
            if isinstance(holder, dict)
            for key, value in holder.items()
        ]
    found = [(path, value) for path, value in level if _is_record_list(value)]
    if len(found) > 1:
        paths = ", ".join(path for path, _ in found[:5])
        raise PermanentError(f"the response holds several lists of objects; set records_path to one of {paths}")
    return found[0][1] if found else data


def _cell(value):
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value
