"""What the OpenAPI document states, the API enforces exactly (so Schemathesis finds no gap)."""

import json

import pytest

from api.openapi import openapi_document
from reports.kinds import KINDS
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
    response = token_client.get("/report/task/dead-letters", {"cursor": "99999999999999999-999999999999999999"})
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
    response = post(token_client, "/report/task/submit", {"kind": "http_export", "params": {"records_path": "a\x00b"}})
    assert response.status_code == 400
    assert "NUL" in response.json()["error"]
    assert not ReportTask.objects.exists()


def test_an_idempotency_header_is_checked_like_the_field(token_client):
    assert post(token_client, "/report/task/submit", {"kind": "probe"}, **{"Idempotency-Key": "ok-1"}).status_code == 201
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
    bad_key = post(token_client, "/report/batch/submit", {"items": [{"kind": "probe"}], "idempotency_key": None})
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
        assert schemas[f"{title}BatchItem"]["properties"]["params"] == {"$ref": f"#/components/schemas/{title}Params"}
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
