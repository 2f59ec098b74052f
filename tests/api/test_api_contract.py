"""The OpenAPI document is true: every documented response is produced and matches its schema,
and every API route is documented."""

import json
import re
import uuid
from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import URLPattern, get_resolver
from django.utils import timezone

from api.openapi import openapi_document
from api.submit_budget import REPLAY, SUBMIT, charge_budget
from deadletters.models import AlertSnooze, BulkAction, CauseState
from reports.models import ReportBatch, TaskStatus
from reports.services.tokens import create_api_token
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "put", "patch", "delete")


# --- a small validator for the JSON Schema subset the document uses -------------------


def resolve(doc, schema):
    while "$ref" in schema:
        node = doc
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def check_format(fmt, value, where):
    if fmt == "uuid":
        uuid.UUID(value)
    elif fmt == "date-time":
        assert datetime.fromisoformat(value).tzinfo is not None, f"{where}: naive date-time {value!r}"
    elif fmt == "uri":
        assert re.match(r"^https?://[^\s/]+/\S*$", value), f"{where}: not a URL {value!r}"


JSON_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def validate(doc, schema, value, where="$"):
    schema = resolve(doc, schema)
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        assert any(JSON_TYPES[t](value) for t in types), f"{where}: {value!r} is not {types}"
    if value is None:
        return
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
    if "const" in schema:
        assert value == schema["const"], f"{where}: {value!r} != {schema['const']!r}"
    if "format" in schema and isinstance(value, str):
        check_format(schema["format"], value, where)
    if "maxLength" in schema:
        assert len(value) <= schema["maxLength"], where
    if "minimum" in schema:
        assert value >= schema["minimum"], where
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            assert name in value, f"{where}: missing {name!r}"
        if schema.get("additionalProperties") is False:
            extra = set(value) - set(properties)
            assert not extra, f"{where}: undocumented fields {sorted(extra)}"
        for name, item in value.items():
            if name in properties:
                validate(doc, properties[name], item, f"{where}.{name}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            validate(doc, schema["items"], item, f"{where}[{index}]")


# --- the scenarios ----------------------------------------------------------------------


def template_of(path: str) -> str:
    path = re.sub(r"^/report/batch/[^/]+/status$", "/report/batch/{batch_id}/status", path)
    path = re.sub(r"^/report/alerts/snooze/[^/]+/lift$", "/report/alerts/snooze/{snooze_id}/lift", path)
    path = re.sub(r"^/report/cause/[^/]+(/\w+)?$", r"/report/cause/{fingerprint}\1", path)
    path = re.sub(r"^/report/dead-letter/[^/]+/(\w+)$", r"/report/dead-letter/{letter_id}/\1", path)
    path = re.sub(r"^/report/kind/[^/]+/(\w+)$", r"/report/kind/{kind}/\1", path)
    path = re.sub(r"^/report/cause/[^/]+/note$", "/report/cause/{fingerprint}/note", path)
    path = re.sub(r"^/report/bulk/(?!start$)[^/]+/(\w+)$", r"/report/bulk/{bulk_id}/\1", path)
    return re.sub(r"^/report/task/[^/]+/(status|replay|output|cancel|retry-now|stop)$",
                  r"/report/task/{task_id}/\1", path)


@pytest.fixture
def world(db, media_root, django_user_model, api_token):
    media_root.mkdir(parents=True, exist_ok=True)
    (media_root / "out.csv").write_text("a,b\n1,2\n")
    staff = django_user_model.objects.create_user("plain-staff", password="pw-123456789", is_staff=True)
    spent, spent_raw = create_api_token(name="spent-budget", scopes=("submit",))
    charge_budget(SUBMIT, spent, cost=10 * settings.API_SUBMIT_RATE[0])
    replays_spent, replays_spent_raw = create_api_token(name="spent-replays", scopes=("replay", "operator"))
    charge_budget(REPLAY, replays_spent, cost=10 * settings.API_REPLAY_RATE[0])
    return {
        "token": api_token,
        "reader": create_api_token(name="reader", scopes=("read",))[1],
        "spent": spent_raw,
        "replays-spent": replays_spent_raw,
        "done": make_task(status=TaskStatus.DONE, attempt=1, output_file="out.csv"),
        "gone": make_task(status=TaskStatus.DONE, attempt=1, output_file="gone.csv"),
        "running": make_task(status=TaskStatus.RUNNING, attempt=1),
        "dead": make_dead_letter(error_message="boom\ntrace").task,
        "staff": staff,
        "pending": make_task(),
        "retrying": make_task(status=TaskStatus.RETRYING, attempt=1),
        "stoppable": make_task(status=TaskStatus.RUNNING, attempt=1),
        "to_archive": make_dead_letter(error_message="to archive"),
        "to_discard": make_dead_letter(error_message="to discard"),
        "to_restore": make_dead_letter(error_message="to restore", status="archived"),
        "to_replay": make_dead_letter(error_message="to replay"),
        "to_schedule": make_dead_letter(error_message="to replay later"),
        "cause": CauseState.objects.create(fingerprint="c" * 40).fingerprint,
    }


def scenarios(world):
    """(method, path, kwargs for the client call, credentials) covering every documented response."""
    done, dead, running, gone = world["done"], world["dead"], world["running"], world["gone"]
    missing = uuid.uuid4()
    js = {"content_type": "application/json"}
    snooze = {"kind": "probe", "minutes": 30, "reason": "noisy during a migration"}
    return [
        ("get", "/report/openapi.json", {}, None),
        ("post", "/report/openapi.json", {}, None),
        # submit
        ("post", "/report/task/submit", {"data": {"kind": "probe", "idempotency_key": "c1"}, **js}, "token"),
        ("post", "/report/task/submit", {"data": {"kind": "probe", "idempotency_key": "c1"}, **js}, "token"),
        ("post", "/report/task/submit", {"data": "[1]", **js}, "token"),
        ("post", "/report/task/submit", {"data": {"kind": "probe"}, **js}, None),
        ("post", "/report/task/submit", {"data": {"kind": "probe"}, **js}, "staff-no-csrf"),
        ("get", "/report/task/submit", {}, "token"),
        (
            "post",
            "/report/task/submit",
            {"data": {"kind": "probe", "params": {"sleep_seconds": 1}, "idempotency_key": "c1"}, **js},
            "token",
        ),
        ("post", "/report/task/submit", {"data": "x" * 300_000, **js}, "token"),
        ("post", "/report/task/submit", {"data": "{}", "content_type": "text/plain"}, "token"),
        ("post", "/report/task/submit", {"data": {"kind": "nope"}, **js}, "token"),
        ("post", "/report/task/submit", {"data": {"kind": "probe"}, **js}, "reader"),
        ("post", "/report/task/submit", {"data": {"kind": "sales_summary"}, **js}, "spent"),
        # status
        ("get", f"/report/task/{done.public_id}/status", {}, "token"),
        ("get", f"/report/task/{dead.public_id}/status", {}, "token"),
        ("get", f"/report/task/{done.public_id}/status", {}, None),
        ("get", f"/report/task/{done.public_id}/status", {}, "staff"),
        ("get", f"/report/task/{missing}/status", {}, "token"),
        ("post", f"/report/task/{done.public_id}/status", {}, "token"),
        # output
        ("get", f"/report/task/{done.public_id}/output", {}, "token"),
        ("get", f"/report/task/{done.public_id}/output", {}, None),
        ("get", f"/report/task/{done.public_id}/output", {}, "staff"),
        ("get", f"/report/task/{gone.public_id}/output", {}, "token"),
        ("post", f"/report/task/{done.public_id}/output", {}, "token"),
        ("get", f"/report/task/{running.public_id}/output", {}, "token"),
        # dead letters
        ("get", "/report/task/dead-letters", {"data": {"limit": "1"}}, "token"),
        ("get", "/report/task/dead-letters", {"data": {"limit": "x"}}, "token"),
        ("get", "/report/task/dead-letters", {}, None),
        ("get", "/report/task/dead-letters", {}, "staff"),
        ("post", "/report/task/dead-letters", {}, "token"),
        # dead letters by cause
        ("get", "/report/dead-letters/groups", {"data": {"kind": "probe"}}, "token"),
        ("get", "/report/dead-letters/groups", {"data": {"kind": "nope"}}, "token"),
        ("get", "/report/dead-letters/groups", {}, None),
        ("get", "/report/dead-letters/groups", {}, "staff"),
        ("post", "/report/dead-letters/groups", {}, "token"),
        # replay (the dead one last: earlier cases must not replay it)
        ("post", f"/report/task/{dead.public_id}/replay", {"data": {"why": 1}, **js}, "token"),
        ("post", f"/report/task/{dead.public_id}/replay", {}, None),
        ("post", f"/report/task/{dead.public_id}/replay", {**js}, "staff-no-csrf"),
        ("post", f"/report/task/{missing}/replay", {**js}, "token"),
        ("get", f"/report/task/{dead.public_id}/replay", {}, "token"),
        ("post", f"/report/task/{running.public_id}/replay", {**js}, "token"),
        ("post", f"/report/task/{dead.public_id}/replay", {"data": "x" * 300_000, **js}, "token"),
        (
            "post",
            f"/report/task/{dead.public_id}/replay",
            {"data": "{}", "content_type": "text/csv"},
            "token",
        ),
        ("post", f"/report/task/{dead.public_id}/replay", {"data": {"reason": 1}, **js}, "token"),
        ("post", f"/report/task/{dead.public_id}/replay", {**js}, "replays-spent"),
        ("post", f"/report/task/{dead.public_id}/replay", {"data": {"reason": "fixed"}, **js}, "token"),
        # batches (api/openapi/batches.py documents their paths)
        (
            "post",
            "/report/batch/submit",
            {"data": {"items": [{"kind": "probe"}], "idempotency_key": "b"}, **js},
            "token",
        ),
        (
            "post",
            "/report/batch/submit",
            {"data": {"items": [{"kind": "probe"}], "idempotency_key": "b"}, **js},
            "token",
        ),
        ("post", "/report/batch/submit", {"data": {"items": [{"kind": "nope"}]}, **js}, "token"),
        (
            "post",
            "/report/batch/submit",
            {"data": {"items": [{"kind": "probe"}, {"kind": "probe"}], "idempotency_key": "b"}, **js},
            "token",
        ),
        ("post", "/report/batch/submit", {"data": {"items": [], "extra": 1}, **js}, "token"),
        ("post", "/report/batch/submit", {"data": {"items": []}, **js}, None),
        ("post", "/report/batch/submit", {"data": {"items": [{"kind": "sales_summary"}]}, **js}, "reader"),
        ("post", "/report/batch/submit", {"data": {"items": [{"kind": "sales_summary"}]}, **js}, "spent"),
        ("post", "/report/batch/submit", {"data": "x" * 2_200_000, **js}, "token"),
        ("post", "/report/batch/submit", {"data": "{}", "content_type": "text/plain"}, "token"),
        ("get", f"/report/batch/{missing}/status", {}, "token"),
        ("get", f"/report/batch/{missing}/status", {}, None),
        ("get", f"/report/batch/{missing}/status", {}, "staff"),
        ("get", "BATCH_STATUS", {}, "token"),
        # alert snoozes (api/openapi/alerts.py)
        ("post", "/report/alerts/snooze", {"data": snooze, **js}, "token"),
        ("post", "/report/alerts/snooze", {"data": "[1]", **js}, "token"),
        ("post", "/report/alerts/snooze", {"data": snooze, **js}, None),
        ("post", "/report/alerts/snooze", {"data": snooze, **js}, "reader"),
        ("get", "/report/alerts/snooze", {}, "token"),
        ("post", "/report/alerts/snooze", {"data": "{}", "content_type": "text/plain"}, "token"),
        ("post", "/report/alerts/snooze", {"data": {"minutes": 30, "reason": "both unnamed"}, **js}, "token"),
        ("get", "/report/alerts/snoozes", {}, "token"),
        ("get", "/report/alerts/snoozes", {}, None),
        ("get", "/report/alerts/snoozes", {}, "reader"),
        ("post", "/report/alerts/snoozes", {}, "token"),
        ("get", "/report/alerts/channels", {}, "token"),
        ("get", "/report/alerts/channels", {}, None),
        ("get", "/report/alerts/channels", {}, "reader"),
        ("post", "/report/alerts/channels", {}, "token"),
        ("post", "/report/alerts/snooze/999999/lift", {}, "token"),
        ("post", "/report/alerts/snooze/999999/lift", {}, None),
        ("post", "/report/alerts/snooze/999999/lift", {}, "reader"),
        ("get", "/report/alerts/snooze/999999/lift", {}, "token"),
        ("post", "SNOOZE_LIFT", {}, "token"),
        *note_scenarios(),
        *control_scenarios(world, missing),
        *operator_scenarios(world),
        *bulk_scenarios(missing),
        # Last: each starts another bulk action, and the BULK/ scenarios above expect one.
        *plan_scenarios(world),
        *cause_scenarios(world),
    ]


def note_scenarios():
    """A cause's runbook note: GET, PUT and DELETE, each refusal, then the calls that act."""
    js = {"content_type": "application/json"}
    cause = CauseState.objects.create(fingerprint="e" * 40)
    path, unknown = f"/report/cause/{cause.fingerprint}/note", f"/report/cause/{'d' * 40}/note"
    note = {"data": {"text": {"en": "Owner: payments"}, "links": ["https://wiki.example.com/x"]}, **js}
    return [
        *((method, path, {}, who) for method in ("get", "delete") for who in (None, "reader")),
        ("get", unknown, {}, "token"),
        ("delete", unknown, {}, "token"),
        ("post", path, {}, "token"),
        ("put", path, note, None),
        ("put", path, note, "reader"),
        ("put", unknown, note, "token"),
        ("put", path, {"data": {"why": 1}, **js}, "token"),
        ("put", path, {"data": "x" * 300_000, **js}, "token"),
        ("put", path, {"data": "{}", "content_type": "text/plain"}, "token"),
        ("put", path, {"data": {"links": ["javascript:alert(1)"]}, **js}, "token"),
        ("put", path, note, "token"),
        ("get", path, {}, "token"),
        ("delete", path, {}, "token"),
    ]


def cause_scenarios(world):
    """A cause's lifecycle (api/openapi/causes.py); after SNOOZE_LIFT, as a mute is a snooze too."""
    js = {"content_type": "application/json"}
    show, fixed, mute = f"/report/cause/{world['cause']}", f"/report/cause/{world['cause']}/fixed", \
        f"/report/cause/{'d' * 40}/mute"
    cases = [
        ("get", show, {}, "token"), ("get", show, {}, None), ("get", show, {}, "reader"),
        ("get", "/report/cause/nope", {}, "token"), ("post", show, {}, "token"),
        ("post", fixed, {"data": {"undo": True}, **js}, "token"),
        ("post", fixed, {**js}, "token"),  # this site names no release: 409
        ("post", fixed, {"data": {"undo": "yes"}, **js}, "token"),
        ("post", f"/report/cause/{'f' * 40}/fixed", {"data": {"undo": True}, **js}, "token"),
        ("post", mute, {"data": {"total": 0}, **js}, "token"),
        ("post", mute, {"data": {"total": 50, "reason": "flaky"}, **js}, "token"),
        ("post", "/report/cause/nope/mute", {"data": {"total": 5}, **js}, "token"),
    ]
    for path in (fixed, mute):
        cases += [
            ("post", path, {"data": {"why": 1}, **js}, "token"),
            ("post", path, {"data": {"total": 5}, **js}, None),
            ("post", path, {"data": {"total": 5}, **js}, "reader"),
            ("get", path, {}, "token"),
            ("post", path, {"data": "x" * 300_000, **js}, "token"),
            ("post", path, {"data": "{}", "content_type": "text/plain"}, "token"),
        ]
    return cases


def bulk_scenarios(missing):
    js = {"content_type": "application/json"}
    start = "/report/bulk/start"
    cases = [
        ("post", start, {"data": {"action": "archive", "why": 1}, **js}, "token"),
        ("post", start, {"data": {"action": "archive"}, **js}, None),
        ("post", start, {"data": {"action": "archive"}, **js}, "reader"),
        ("get", start, {}, "token"),
        ("post", start, {"data": "x" * 300_000, **js}, "token"),
        ("post", start, {"data": "{}", "content_type": "text/plain"}, "token"),
        ("post", start, {"data": {"action": "nope"}, **js}, "token"),
        ("post", start, {"data": {"action": "archive", "dry_run": True}, **js}, "token"),
        ("post", start, {"data": {"action": "archive", "filter": {"q": "no such text"}}, **js}, "token"),
        ("get", "BULK/status", {}, "token"),
        ("get", "BULK/status", {}, None),
        ("get", "BULK/status", {}, "reader"),
        ("get", f"/report/bulk/{missing}/status", {}, "token"),
        ("post", "BULK/status", {}, "token"),
    ]
    for action in ("pause", "resume", "rate", "cancel"):
        body = {"data": {"rate_per_second": 2}, **js} if action == "rate" else {**js}
        cases += [
            ("post", f"BULK/{action}", {"data": {"why": 1}, **js}, "token"),
            ("post", f"BULK/{action}", body, None),
            ("post", f"BULK/{action}", body, "reader"),
            ("post", f"/report/bulk/{missing}/{action}", body, "token"),
            ("get", f"BULK/{action}", {}, "token"),
            ("post", f"BULK/{action}", {"data": "x" * 300_000, **js}, "token"),
            ("post", f"BULK/{action}", {"data": "{}", "content_type": "text/plain"}, "token"),
        ]
        if action == "rate":
            cases.append(("post", "BULK/rate", {"data": {"rate_per_second": -1}, **js}, "token"))
        cases += [("post", f"BULK/{action}", body, "token")] * (1 if action == "rate" else 2)
    cases.append(("post", "BULK/rate", {"data": {"rate_per_second": 2}, **js}, "token"))  # cancelled: 409
    return cases


def plan_scenarios(world):
    """A start time and a canary: refused for what is true now (409), and a scheduled replay (202)."""
    js = {"content_type": "application/json"}
    soon = (timezone.now() + timedelta(hours=1)).isoformat()
    schedule = f"/report/dead-letter/{world['to_schedule'].pk}/replay"
    return [
        ("post", "/report/bulk/start", {"data": {"action": "replay", "canary": 5}, **js}, "token"),
        ("post", "/report/bulk/start",
         {"data": {"action": "archive", "start_at": "2020-01-01T00:00:00Z"}, **js}, "token"),
        ("post", schedule, {"data": {"start_at": "2020-01-01T00:00:00+08:00"}, **js}, "token"),
        ("post", schedule, {"data": {"start_at": soon, "reason": "after the fix is deployed"}, **js},
         "token"),
    ]


def operator_scenarios(world):
    """Dead-letter and kind actions: each refusal first, then the call that acts (and, where a
    second call conflicts, that one)."""
    js = {"content_type": "application/json"}
    done_letter = world["dead"].dead_letters.get().pk  # its task is replayed by an earlier scenario
    cases = []
    for path, missing_path, conflict_path, bad, tail in (
        *(
            (f"/report/dead-letter/{world[f'to_{a}'].pk}/{a}", f"/report/dead-letter/999999/{a}", None,
             {"reason": 1}, 2)
            for a in ("archive", "discard", "restore")
        ),
        (f"/report/dead-letter/{world['to_replay'].pk}/replay", "/report/dead-letter/999999/replay",
         f"/report/dead-letter/{done_letter}/replay", {"params": [1]}, 1),
        ("/report/kind/sales_summary/pause", "/report/kind/nope/pause", None, {"reason": 1}, 1),
        ("/report/kind/sales_summary/resume", "/report/kind/nope/resume", None, {"reason": 1}, 2),
        ("/report/kind/sales_summary/breaker", "/report/kind/nope/breaker", None, {"action": "x"}, 0),
    ):
        cases += [
            ("post", path, {"data": {"why": 1}, **js}, "token"),
            ("post", path, {**js}, None),
            ("post", path, {**js}, "reader"),
            ("post", missing_path, {**js}, "token"),
            ("get", path, {}, "token"),
            ("post", path, {"data": "x" * 300_000, **js}, "token"),
            ("post", path, {"data": "{}", "content_type": "text/plain"}, "token"),
            ("post", path, {"data": bad, **js}, "token"),
        ]
        if conflict_path:
            cases.append(("post", conflict_path, {**js}, "token"))
        cases += [("post", path, {"data": {"reason": "contract"}, **js}, "token")] * tail
    # A kind with no upstream has no breaker to open (409), and closing it changes nothing (200).
    cases += [("post", "/report/kind/sales_summary/breaker", {"data": {"action": action}, **js}, "token")
              for action in ("open", "close")]
    return cases


def control_scenarios(world, missing):
    """Cancel, retry now and stop: each refusal first, then the one call that acts."""
    js = {"content_type": "application/json"}
    done = world["done"].public_id
    cases = []
    for action, target, bad_field in (
        ("cancel", world["pending"].public_id, {"reason": 1}),
        ("retry-now", world["retrying"].public_id, {"reason": 1}),
        ("stop", world["stoppable"].public_id, {"then": "later"}),
    ):
        path = f"/report/task/{target}/{action}"
        cases += [
            ("post", path, {"data": {"why": 1}, **js}, "token"),
            ("post", path, {**js}, None),
            ("post", path, {**js}, "reader"),
            ("post", f"/report/task/{missing}/{action}", {**js}, "token"),
            ("get", path, {}, "token"),
            ("post", f"/report/task/{done}/{action}", {**js}, "token"),
            ("post", path, {"data": "x" * 300_000, **js}, "token"),
            ("post", path, {"data": "{}", "content_type": "text/plain"}, "token"),
            ("post", path, {"data": bad_field, **js}, "token"),
            ("post", path, {"data": {"reason": "contract"}, **js}, "token"),
        ]
    return cases


def call(world, method, path, kwargs, credentials):
    client = Client(enforce_csrf_checks=True)
    headers = {}
    if credentials in ("token", "reader", "spent", "replays-spent"):
        headers["Authorization"] = f"Bearer {world[credentials]}"
    elif credentials in ("staff", "staff-no-csrf"):
        client.force_login(world["staff"])
    kwargs = dict(kwargs)
    if isinstance(kwargs.get("data"), dict) and kwargs.get("content_type") == "application/json":
        kwargs["data"] = json.dumps(kwargs["data"])
    return getattr(client, method)(path, headers=headers, **kwargs)


def test_every_documented_response_happens_and_matches_its_schema(world):
    doc = openapi_document()
    documented = {
        (path, method, status)
        for path, item in doc["paths"].items()
        for method, operation in item.items()
        for status in operation["responses"]
    }
    seen = set()
    for method, path, kwargs, credentials in scenarios(world):
        if path == "BATCH_STATUS":
            path = f"/report/batch/{ReportBatch.objects.get().public_id}/status"
        if path == "SNOOZE_LIFT":
            path = f"/report/alerts/snooze/{AlertSnooze.objects.get().pk}/lift"
        if path.startswith("BULK/"):
            path = f"/report/bulk/{BulkAction.objects.get().public_id}/{path.removeprefix('BULK/')}"
        response = call(world, method, path, kwargs, credentials)
        template = template_of(path)
        status = str(response.status_code)
        operations = doc["paths"][template]
        # A wrong method is answered with 405: documented on the path's own operation.
        operation_method = method if method in operations else next(iter(operations))
        where = f"{method.upper()} {path} -> {status}"
        assert status in operations[operation_method]["responses"], f"undocumented response {where}"
        documented_response = operations[operation_method]["responses"][status]
        content = documented_response["content"]
        media_type = response["Content-Type"].split(";")[0]
        assert media_type in content or list(content) == ["*/*"], f"{where}: {media_type} not documented"
        media = content.get(media_type) or content["*/*"]
        if media_type == "application/json":
            validate(doc, media["schema"], response.json(), where)
        seen.add((template, operation_method, status))
    assert documented - seen == set(), "documented but never produced"


def test_every_api_route_is_documented_with_its_methods():
    doc = openapi_document()
    routes = {
        "/report/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", str(p.pattern))
        for p in get_resolver("api.urls").url_patterns
        if isinstance(p, URLPattern) and p.name
    }
    assert routes == set(doc["paths"])
    for item in doc["paths"].values():
        assert [m for m in item if m in METHODS]


def test_the_document_is_served_publicly_and_is_what_the_code_builds(client):
    response = client.get("/report/openapi.json")

    assert response.status_code == 200
    built = openapi_document(server_url="http://testserver", public=True)
    assert response.json() == json.loads(json.dumps(built))
    assert response.json()["servers"] == [{"url": "http://testserver", "description": "This report console."}]
    assert response.json()["openapi"].startswith("3.1")


def test_session_with_permissions_gets_the_documented_200(world):
    staff = world["staff"]
    staff.user_permissions.add(
        Permission.objects.get(codename="view_reporttask"), Permission.objects.get(codename="view_deadletter")
    )
    client = Client()
    client.force_login(staff)
    doc = openapi_document()

    response = client.get(f"/report/task/{world['done'].public_id}/status")

    schema = doc["paths"]["/report/task/{task_id}/status"]["get"]["responses"]["200"]["content"][
        "application/json"
    ]
    validate(doc, schema["schema"], response.json())
