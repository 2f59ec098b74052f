"""Fetches JSON over HTTP and tabulates it; its network errors are the natural transient failures."""

import json
from urllib.parse import urlsplit

import requests
from django.conf import settings

from reports.errors import InvalidParams, PermanentError
from reports.kinds.base import Param, ReportKind, RunContext, choice, reject_unknown, write_table


class HttpExport(ReportKind):
    name = "http_export"
    title = "HTTP JSON export"
    default_priority = "low"
    # The declaration the console and the OpenAPI document show; validate() below is this kind's own.
    params = (
        Param(
            "url",
            "string",
            default=lambda: settings.HTTP_EXPORT_URL,
            max_length=2000,
            description="http(s) URL of a JSON answer; only hosts in HTTP_EXPORT_ALLOWED_HOSTS (others: 422)",
            schema_extra=lambda: {"format": "uri"},
        ),
        Param("format", "string", default="csv", choices=("csv", "xlsx"), description="file format"),
        Param(
            "records_path",
            "string",
            default="",
            max_length=200,
            description="dotted path to the list of records in the answer (e.g. data.items)",
        ),
    )

    def validate(self, params):
        reject_unknown(params, {"url", "format", "records_path"})
        url = params.get("url", settings.HTTP_EXPORT_URL)
        if not isinstance(url, str) or len(url) > 2000:
            raise InvalidParams("url", "must be a URL string")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidParams("url", "must be an http(s) URL")
        # Workers sit inside the network: only configured hosts, never an arbitrary fetch.
        if parts.hostname not in settings.HTTP_EXPORT_ALLOWED_HOSTS:
            raise InvalidParams("url", f"host {parts.hostname!r} is not in HTTP_EXPORT_ALLOWED_HOSTS")
        records_path = params.get("records_path", "")
        if not isinstance(records_path, str) or len(records_path) > 200:
            raise InvalidParams("records_path", "must be a dotted path string")
        return {
            "url": url,
            "format": choice(params, "format", ("csv", "xlsx"), "csv"),
            "records_path": records_path,
        }

    def generate(self, params, ctx: RunContext):
        response = requests.get(params["url"], timeout=settings.HTTP_EXPORT_TIMEOUT)
        response.raise_for_status()
        try:
            data = response.json()
        except ValueError:
            raise PermanentError(f"{params['url']} did not answer JSON") from None
        for key in filter(None, params["records_path"].split(".")):
            if not isinstance(data, dict) or key not in data:
                raise PermanentError(f"records_path: {key!r} not found in the response")
            data = data[key]
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise PermanentError("the response is not a list of objects")
        columns: list[str] = []
        for item in data:
            columns.extend(key for key in item if key not in columns)
        rows = ([_cell(item.get(column, "")) for column in columns] for item in data)
        return write_table(ctx.output_dir / "export", params["format"], columns, rows)


def _cell(value):
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value
