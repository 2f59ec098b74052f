"""The token commands: create with scopes, list without secrets, revoke; and what migration 0003
gives the tokens and tasks that existed before scopes."""

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from reports.models import ApiToken

pytestmark = pytest.mark.django_db


def test_create_api_token_takes_scopes_and_defaults_to_submit_and_read(capsys):
    call_command("create_api_token", "etl")
    call_command("create_api_token", "ops-bot", "--scope", "read", "--scope", "operator", "--scope", "replay")
    capsys.readouterr()

    assert ApiToken.objects.get(name="etl").scopes == ["submit", "read"]
    assert ApiToken.objects.get(name="ops-bot").scopes == ["read", "replay", "operator"]


@pytest.mark.parametrize("scopes", [["--scope", "admin"], ["--scope", "operator"]])
def test_create_api_token_refuses_unknown_scopes_and_a_lone_operator(scopes, capsys):
    with pytest.raises((CommandError, SystemExit)):
        call_command("create_api_token", "x", *scopes)
    assert not ApiToken.objects.exists()


def test_list_api_tokens_shows_scopes_and_dates_never_the_secret(capsys):
    call_command("create_api_token", "etl", "--scope", "submit")
    raw = capsys.readouterr().out.strip()
    Client().get("/report/task/dead-letters", HTTP_AUTHORIZATION=f"Bearer {raw}")  # 403, but a use
    call_command("create_api_token", "old")
    call_command("revoke_api_token", "old")
    capsys.readouterr()

    call_command("list_api_tokens")
    lines = capsys.readouterr().out.splitlines()

    assert lines[0].split() == ["NAME", "PREFIX", "SCOPES", "CREATED", "LAST", "USED", "REVOKED"]
    etl, old = lines[1].split(), lines[2].split()
    assert etl[:3] == ["etl", f"{raw[:12]}...", "submit"] and etl[-1] == "-" and etl[-2] != "-"
    assert old[:3] == ["old", old[1], "submit,read"] and old[-1] != "-"
    assert raw not in "\n".join(lines) and raw[12:20] not in "\n".join(lines)


def test_revoke_api_token_stops_it_at_once(capsys):
    call_command("create_api_token", "etl")
    raw = capsys.readouterr().out.strip()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/report/task/dead-letters").status_code == 200

    call_command("revoke_api_token", "etl")

    assert client.get("/report/task/dead-letters").status_code == 401
    with pytest.raises(CommandError, match="no active API token"):
        call_command("revoke_api_token", "etl")


@pytest.mark.django_db(transaction=True)
def test_migration_0003_gives_old_tokens_their_scopes_and_their_tasks():
    executor = MigrationExecutor(connection)
    executor.migrate([("reports", "0002_attempts_before_run")])
    old = executor.loader.project_state([("reports", "0002_attempts_before_run")]).apps
    token = old.get_model("reports", "ApiToken").objects.create(name="etl", token_hash="h" * 64,
                                                                prefix="rpt_x")
    Task = old.get_model("reports", "ReportTask")
    fields = dict(kind="probe", params={}, max_attempts=3, timeout_seconds=300)
    Task.objects.create(submitted_by="token:etl", idempotency_key="k", **fields)
    Task.objects.create(submitted_by="alice", idempotency_key="k2", **fields)
    old.get_model("reports", "ReportBatch").objects.create(submitted_by="token:etl")

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    from reports.models import ReportBatch, ReportTask

    assert ApiToken.objects.get(pk=token.pk).scopes == ["submit", "read", "replay"]
    assert dict(ReportTask.objects.values_list("submitted_by", "owner")) == {
        "token:etl": token.pk, "alice": None}
    assert ReportBatch.objects.get().owner_id == token.pk
