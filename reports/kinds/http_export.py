"""Fetches JSON over HTTP and tabulates it; its network errors are the natural transient failures.
What it may fetch, and how, is reports/kinds/outbound.py's policy, checked at submit and again before
every fetch (a replay runs under today's allowlist, not the one the task was submitted under).

A task without `url` reads the default source, HTTP_EXPORT_URL, which may hold the source's
credentials: it is looked up by the worker when the attempt runs and never copied into the task's
params, the OpenAPI document, error messages or logs (those name it "the default source")."""

import json
import logging

from django.conf import settings
from django.utils.translation import gettext, gettext_noop

import reports.kinds.outbound as outbound
from reports.errors import InvalidParams, PermanentError
from reports.kinds.base import Param, ReportKind, RunContext, choice, reject_unknown, write_table
from reports.kinds.json_records import JsonText, collect_columns, decode_text, find_records

logger = logging.getLogger(__name__)
DEFAULT_SOURCE_REFUSED = gettext_noop(
    "the default source (HTTP_EXPORT_URL) is refused by the outbound policy; an operator must fix the "
    "setting or HTTP_EXPORT_ALLOWED_HOSTS"
)


class HttpExport(ReportKind):
    name = "http_export"
    title = gettext_noop("HTTP JSON export")
    default_priority = "low"
    # The declaration the console and the OpenAPI document show; validate() below is this kind's own.
    params = (
        Param(
            "url",
            "string",
            max_length=2000,
            description=gettext_noop(
                "http(s) URL of a JSON answer; only host:port pairs in HTTP_EXPORT_ALLOWED_HOSTS (the "
                "pattern lists them to a token or a console session), public addresses unless the "
                "allowlist names the address (others: "
                "422). Left out: the default source the operators configured (HTTP_EXPORT_URL), read "
                "when the report runs"
            ),
            schema_extra=lambda: url_schema(settings.HTTP_EXPORT_ALLOWED_HOSTS),
        ),
        Param("format", "string", default="csv", choices=("csv", "xlsx"),
              description=gettext_noop("file format")),
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
    health_check = "probe_source"

    def has_upstream(self) -> bool:
        return bool(settings.HTTP_EXPORT_URL)

    def probe_source(self, timeout: float) -> None:
        """The breaker's probe: the default source gives an HTTP answer that is not 429 or 5xx."""
        checked = self._default_source(must_resolve=True)  # refused by the policy: the probe fails
        try:
            outbound.fetch(checked, timeout=timeout, deadline=timeout,
                           max_bytes=settings.HTTP_EXPORT_MAX_BYTES)
        except PermanentError:  # a redirect, a 4xx, a large answer: the source answers
            pass

    def params_schema(self, *, public: bool = False) -> dict:
        schema = super().params_schema()
        if public and "pattern" in schema["properties"]["url"]:  # the allowlist names internal hosts
            schema["properties"]["url"]["pattern"] = f"^https?://[-.:\\[\\]0-9A-Za-z]+{_URL_REST}$"
        if not settings.HTTP_EXPORT_URL:
            schema["required"] = ["url"]  # no default source to fall back on
        return schema

    def validate(self, params):
        reject_unknown(params, {"url", "format", "records_path"})
        cleaned = {}
        if "url" in params:
            url = params["url"]
            if not isinstance(url, str) or not url or len(url) > 2000:
                raise InvalidParams("url", gettext("must be a URL string"))
            # A name that does not resolve during the submit is checked again before the fetch.
            cleaned["url"] = self._check(url, must_resolve=False).target.url
        else:
            self._default_source(must_resolve=False)
        records_path = params.get("records_path", "")
        if not isinstance(records_path, str) or len(records_path) > 200:
            raise InvalidParams("records_path", gettext("must be a dotted path string"))
        return {**cleaned, "format": choice(params, "format", ("csv", "xlsx"), "csv"),
                "records_path": records_path}

    def _check(self, url: str, *, must_resolve: bool) -> outbound.CheckedUrl:
        try:
            return outbound.check_url(
                url,
                allowed_hosts=settings.HTTP_EXPORT_ALLOWED_HOSTS,
                must_resolve=must_resolve,
            )
        except outbound.UrlRefused as exc:
            raise InvalidParams("url", str(exc)) from None

    def _default_source(self, *, must_resolve: bool) -> outbound.CheckedUrl:
        """HTTP_EXPORT_URL, checked like any URL; what is wrong with it is logged for the operators,
        and the client reads only that the default source is refused."""
        if not settings.HTTP_EXPORT_URL:
            raise InvalidParams(
                "url", gettext("is required (no default source, HTTP_EXPORT_URL, is configured)")
            )
        try:
            return self._check(settings.HTTP_EXPORT_URL, must_resolve=must_resolve)
        except InvalidParams as exc:
            logger.warning("http_export: HTTP_EXPORT_URL is refused: %s", exc.message)
            raise InvalidParams("url", gettext(DEFAULT_SOURCE_REFUSED)) from None

    def generate(self, params, ctx: RunContext):
        if "url" in params:
            checked = self._check(params["url"], must_resolve=True)
        else:
            checked = self._default_source(must_resolve=True)
        body = outbound.fetch(
            checked,
            timeout=settings.HTTP_EXPORT_TIMEOUT,
            deadline=settings.HTTP_EXPORT_DEADLINE,
            max_bytes=settings.HTTP_EXPORT_MAX_BYTES,
        )
        doc = JsonText(decode_text(body))
        del body
        records = find_records(doc, params["records_path"])
        columns, count = collect_columns(doc.records(records))
        # Records with keys of their own make rows x columns mostly empty cells (a 357 KB answer once
        # wrote 125 MB): a table holds at most one cell per byte the answer may have.
        if count * len(columns) > settings.HTTP_EXPORT_MAX_BYTES:
            raise PermanentError(
                f"the records make a table of {count} rows x {len(columns)} columns, more than "
                f"{settings.HTTP_EXPORT_MAX_BYTES} cells (HTTP_EXPORT_MAX_BYTES): too many different keys"
            )
        rows = ([_cell(item.get(column, "")) for column in columns] for item in doc.records(records))
        return write_table(ctx.output_dir / "export", params["format"], columns, rows)


# The path and query of an allowed URL: printable ASCII without a backslash (refused) or a `#`.
_URL_REST = '(?:/[!-"$-\\[\\]-~]*)?'


def url_schema(allowed_hosts) -> dict:
    """The JSON Schema of `url` under this allowlist: a pattern naming each allowed origin (the
    address checks that need DNS are left to the submit and the fetch). No allowlist: no URL."""
    origins = []
    for host, port in sorted(outbound.allowlist(allowed_hosts), key=str):
        bracketed = f"[{host}]" if ":" in host else host
        written = bracketed.replace(".", "\\.").replace("[", "\\[").replace("]", "\\]")
        for scheme, default_port in outbound.DEFAULT_PORTS.items():
            if port is None or port == default_port:
                origins.append(f"{scheme}://{written}(?::{default_port})?")
            else:
                origins.append(f"{scheme}://{written}:{port}")
    if not origins:
        return {"not": {}, "description": "http_export fetches nothing: HTTP_EXPORT_ALLOWED_HOSTS is empty"}
    return {"format": "uri", "pattern": f"^(?:{'|'.join(origins)}){_URL_REST}$"}


def _cell(value):
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value
