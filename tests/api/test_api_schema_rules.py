"""What the OpenAPI document states, the API enforces exactly (so Schemathesis finds no gap)."""

import json
import re

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as settings_hypothesis
from hypothesis import strategies as st

from api.openapi import openapi_document
from reports.kinds import KINDS
from reports.kinds.http_export import url_schema
from reports.kinds.outbound import check_url
from reports.models import ReportBatch, ReportTask
from tests.factories import make_dead_letter

pytestmark = pytest.mark.django_db


def post(client, path, body, **headers):
    return client.post(path, json.dumps(body), content_type="application/json", headers=headers)


def test_the_dead_letter_kind_filter_refuses_unknown_kinds(token_client):
    make_dead_letter()
    assert token_client.get("/report/task/dead-letters?kind=probe").status_code == 200
    response = token_client.get("/report/task/dead-letters?kind=no_such_kind")
    assert response.status_code == 400
    assert response.json()["field"] == "kind"


@pytest.mark.parametrize("cursor", ["abc", "1-", "١٢٣-4", "123456789012345678-1", "1-2\n", "1" * 30])
def test_a_cursor_not_of_the_documented_shape_is_a_400(token_client, cursor):
    response = token_client.get("/report/task/dead-letters", {"cursor": cursor})
    assert response.status_code == 400
    assert response.json()["field"] == "cursor"


def test_any_cursor_of_the_documented_shape_is_a_page(token_client):
    response = token_client.get("/report/task/dead-letters",
                                {"cursor": "99999999999999999-999999999999999999"})
    assert response.status_code == 200
    assert response.json()["results"] == []


@pytest.mark.parametrize("limit", ["٣", "+5", " 5", "5.0"])
def test_a_limit_must_be_ascii_digits(token_client, limit):
    assert token_client.get("/report/task/dead-letters", {"limit": limit}).status_code == 400


@pytest.mark.parametrize(
    "body, field",
    [
        ({"kind": "probe", "params": None}, "params"),
        ({"kind": "probe", "priority": ""}, "priority"),
        ({"kind": "probe", "priority": None}, "priority"),
        ({"kind": "probe", "idempotency_key": None}, "idempotency_key"),
        ({"kind": "probe", "idempotency_key": ""}, "idempotency_key"),
        ({"kind": "probe", "idempotency_key": " padded"}, "idempotency_key"),
        ({"kind": "probe", "idempotency_key": "naïve"}, "idempotency_key"),
    ],
)
def test_a_field_that_is_given_must_be_valid(token_client, body, field):
    response = post(token_client, "/report/task/submit", body)
    assert response.status_code == 422
    assert response.json()["field"] == field
    assert not ReportTask.objects.exists()


def test_a_nul_anywhere_in_the_body_is_refused(token_client):
    response = post(token_client, "/report/task/submit",
                    {"kind": "http_export", "params": {"records_path": "a\x00b"}})
    assert response.status_code == 400
    assert "NUL" in response.json()["error"]
    assert not ReportTask.objects.exists()


def test_an_idempotency_header_is_checked_like_the_field(token_client):
    ok = post(token_client, "/report/task/submit", {"kind": "probe"}, **{"Idempotency-Key": "ok-1"})
    assert ok.status_code == 201
    response = post(token_client, "/report/task/submit", {"kind": "probe"}, **{"Idempotency-Key": "x" * 201})
    assert response.status_code == 422


def test_a_batch_lists_wrong_keys_and_null_fields_in_errors(token_client):
    response = post(
        token_client,
        "/report/batch/submit",
        {"items": [{"kind": "probe", "params": None}, {"kind": "probe", "priority": ""}]},
    )
    assert response.status_code == 422
    assert response.json()["errors"] == [
        {"index": 0, "field": "params", "error": "must be a JSON object"},
        {"index": 1, "field": "priority", "error": "must be one of high, default, low"},
    ]
    bad_key = post(token_client, "/report/batch/submit",
                   {"items": [{"kind": "probe"}], "idempotency_key": None})
    assert bad_key.status_code == 422
    assert bad_key.json()["errors"][0]["field"] == "idempotency_key"
    assert not ReportBatch.objects.exists()


def test_each_kinds_params_are_described_from_its_own_declaration():
    schemas = openapi_document()["components"]["schemas"]
    submit = schemas["SubmitRequest"]
    assert submit["discriminator"]["propertyName"] == "kind"
    assert len(submit["oneOf"]) == len(KINDS)
    for name, kind in KINDS.items():
        title = "".join(part.capitalize() for part in name.split("_"))
        params = schemas[f"{title}Params"]
        assert params["additionalProperties"] is False
        assert set(params["properties"]) == {p.name for p in kind.params}
        assert schemas[f"{title}Submit"]["properties"]["kind"]["const"] == name
        params_ref = {"$ref": f"#/components/schemas/{title}Params"}
        assert schemas[f"{title}BatchItem"]["properties"]["params"] == params_ref
    assert schemas["ProbeParams"]["properties"]["fail_attempts"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 1000,
        "default": 0,
        "description": "fail (transiently) while the attempt number is at most this",
    }


def test_submits_link_to_their_status_for_clients_and_stateful_testing():
    paths = openapi_document()["paths"]
    batch_link = paths["/report/batch/submit"]["post"]["responses"]["201"]["links"]["status"]
    task_link = paths["/report/task/submit"]["post"]["responses"]["201"]["links"]["status"]
    assert batch_link == {
        "operationId": "batchStatus",
        "parameters": {"batch_id": "$response.body#/batch_id"},
        "description": "Follow the batch just submitted.",
    }
    assert task_link["parameters"] == {"task_id": "$response.body#/task_id"}


def test_a_tasks_answers_link_to_every_control_of_the_task():
    paths = openapi_document()["paths"]
    operations = {
        operation["operationId"]: path for path, item in paths.items() for operation in item.values()
    }
    controls = {"taskOutput", "replayTask", "cancelTask", "retryTaskNow", "stopTask"}
    for response, task_id in (
        (paths["/report/task/submit"]["post"]["responses"]["201"], "$response.body#/task_id"),
        (paths["/report/task/{task_id}/status"]["get"]["responses"]["200"], "$response.body#/id"),
    ):
        links = {link["operationId"]: link["parameters"] for link in response["links"].values()}
        assert controls <= set(links)
        for operation in controls:
            assert links[operation] == {"task_id": task_id}
            assert "{task_id}" in operations[operation]


ALLOWLIST = ["127.0.0.1:8000", "example.com", "[::1]:8443", "reports.example.net:80"]


@settings_hypothesis(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_url_the_document_allows_is_accepted_and_others_are_not_offered(data):
    pattern = url_schema(ALLOWLIST)["pattern"]
    url = data.draw(st.from_regex(pattern, fullmatch=True).filter(lambda u: len(u) <= 2000))
    # Names resolve to a public address here (no DNS in a test); addresses are checked as written.
    checked = check_url(url, allowed_hosts=ALLOWLIST, resolver=lambda host, port: ["93.184.216.34"])
    assert checked.target.host_port in {"127.0.0.1:8000", "example.com:443", "example.com:80", "[::1]:8443",
                                         "reports.example.net:80"}


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8001/x", "http://user@127.0.0.1:8000/", "http://127.0.0.1:8000\\@evil/", "ftp://example.com/",
     "http://169.254.169.254/latest", "https://example.com.evil.net/", "http://127.0.0.1:8000/#frag"],
)
def test_urls_outside_the_allowlist_do_not_match_the_documented_pattern(url):
    assert not re.fullmatch(url_schema(ALLOWLIST)["pattern"], url)


def test_the_documented_url_follows_the_allowlist_setting(settings):
    settings.HTTP_EXPORT_ALLOWED_HOSTS = ["127.0.0.1:8811"]
    settings.HTTP_EXPORT_URL = "http://127.0.0.1:8811/report/demo/orders.json"
    schemas = openapi_document()["components"]["schemas"]
    url = schemas["HttpExportParams"]["properties"]["url"]
    assert url["pattern"] == '^(?:http://127\\.0\\.0\\.1:8811|https://127\\.0\\.0\\.1:8811)(?:/[!-"$-\\[\\]-~]*)?$'
    assert "required" not in schemas["HttpExportParams"]
    assert schemas["HttpExportSubmit"]["required"] == ["kind"]

    settings.HTTP_EXPORT_ALLOWED_HOSTS, settings.HTTP_EXPORT_URL = [], ""
    schemas = openapi_document()["components"]["schemas"]
    assert schemas["HttpExportParams"]["properties"]["url"]["not"] == {}
    assert schemas["HttpExportParams"]["required"] == ["url"]
    assert (schemas["HttpExportSubmit"]["required"] == schemas["HttpExportBatchItem"]["required"]
            == ["kind", "params"])


def test_a_backwards_sales_range_is_accepted_and_recorded_forwards(token_client):
    response = post(token_client, "/report/task/submit",
                    {"kind": "sales_summary", "params": {"date_from": "2026-03-01", "date_to": "2026-02-01"}})
    assert response.status_code == 201, response.content
    task = ReportTask.objects.get(public_id=response.json()["task_id"])
    assert (task.params["date_from"], task.params["date_to"]) == ("2026-02-01", "2026-03-01")


def test_the_anonymous_document_names_no_allowed_host(client, settings, api_token):
    """The allowlist names internal host:port pairs: the public document's `url` pattern takes any
    http(s) URL; a caller who may submit (a token, a console session) reads the allowed origins."""
    settings.HTTP_EXPORT_ALLOWED_HOSTS = ["data.internal:8443", "10.1.2.3:9000"]
    settings.HTTP_EXPORT_URL = ""

    public = client.get("/report/openapi.json").content.decode()
    url = json.loads(public)["components"]["schemas"]["HttpExportParams"]["properties"]["url"]
    assert "data.internal" not in public and "10\\\\.1\\\\.2\\\\.3" not in public and "9000" not in public
    assert re.fullmatch(url["pattern"], "https://data.internal:8443/x.json")

    known = client.get("/report/openapi.json", HTTP_AUTHORIZATION=f"Bearer {api_token}").json()
    pattern = known["components"]["schemas"]["HttpExportParams"]["properties"]["url"]["pattern"]
    assert "data\\.internal:8443" in pattern and not re.fullmatch(pattern, "https://other.example/x.json")
