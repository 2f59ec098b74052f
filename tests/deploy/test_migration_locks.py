"""Every migration's PostgreSQL SQL (`manage.py sqlmigrate`) is read by squawk, a migration linter
nobody here wrote: a new statement that would lock a large table (an index built without
CONCURRENTLY, a constraint validated under an exclusive lock, a column rewritten) fails this test.
The hazards of the migrations that every database ran on empty tables are listed with the reason."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parents[2]
APPS = ("reports", "deadletters", "console", "api")

# Rules that do not describe a lock on a large table in this project.
NOT_HAZARDS = {
    "prefer-text-field": "a max_length is a validated limit here, and changing it later is metadata-only",
    "prefer-bigint-over-int": "Django's IntegerField for counters and attempt numbers, far below 2**31",
    "prefer-robust-stmts": "Django records each applied migration; none is re-run half-done",
    "require-lock-timeout": "docs/deploy.md runs migrate with PGOPTIONS='-c lock_timeout=5s'",
    "require-statement-timeout": "as lock_timeout: the deployer bounds migrate's statements",
    "ban-drop-default": "Django drops the default it used to fill a new column; no client relies on it",
}

# Hazards of migrations that predate this check: no release was made before them, so every
# database ran them on empty tables. A migration added from now on has no entry here.
ACCEPTED = {
    ("deadletters.0010_bulk_canary_schedule", "changing-column-type"): "bulk runs: tens of rows",
    ("deadletters.0010_bulk_canary_schedule", "require-concurrent-index-creation"): "bulk runs: tens of rows",
    ("reports.0003_api_token_scopes_and_owners", "adding-foreign-key-constraint"): "empty before any release",
    ("reports.0003_api_token_scopes_and_owners", "require-concurrent-index-deletion"):
        "empty before any release",
    ("reports.0003_api_token_scopes_and_owners", "require-concurrent-index-creation"):
        "empty before any release",
    ("reports.0005_cockpit", "constraint-missing-not-valid"): "empty before any release",
    ("reports.0005_cockpit", "disallowed-unique-constraint"): "empty before any release",
    # Dropping the two tables the one alert stack replaced: their rows moved in 0011; a DROP of a
    # table nothing reads any more takes its lock for an instant.
    ("deadletters.0012_drop_channel_tables", "ban-drop-table"): "replaced tables, rows moved in 0011",
}

SQL_OF_EVERY_MIGRATION = f"""
import io, json
from django.core.management import call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader
sql = {{}}
for app, name in sorted(MigrationLoader(connection).disk_migrations):
    if app in {APPS!r}:
        out = io.StringIO()
        call_command("sqlmigrate", app, name, stdout=out)
        sql[app + "." + name] = out.getvalue()
print(json.dumps(sql))
"""


def squawk_findings(sql: str, path: Path) -> set[str]:
    path.write_text(sql)
    squawk = Path(sys.executable).with_name("squawk")
    done = subprocess.run(
        [str(squawk), "--reporter", "json", "--pg-version", "15", str(path)],
        capture_output=True, text=True, timeout=60,
    )
    assert done.stdout.strip().startswith("["), done.stdout + done.stderr
    return {finding["rule_name"] for finding in json.loads(done.stdout)}


def postgres_url() -> str:
    """sqlmigrate asks the server which migrations it applied: the session's PostgreSQL, or CI's."""
    configured = os.environ.get("DATABASE_URL", "")
    if configured.startswith(("postgres://", "postgresql://")):
        return configured
    return "postgresql://postgres@127.0.0.1:5432/postgres"


@pytest.fixture(scope="module")
def migration_sql() -> dict[str, str]:
    env = dict(os.environ, DATABASE_URL=postgres_url(), DJANGO_SETTINGS_MODULE="config.settings")
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); exec(" + repr(SQL_OF_EVERY_MIGRATION) + ")"],
        cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.database_blind
def test_no_migration_locks_a_large_table_beyond_the_accepted_list(migration_sql, tmp_path):
    assert "reports.0001_initial" in migration_sql and "deadletters.0001_initial" in migration_sql
    found = {
        (migration, rule)
        for migration, sql in migration_sql.items()
        for rule in squawk_findings(sql, tmp_path / f"{migration}.sql")
        if rule not in NOT_HAZARDS
    }
    assert found - set(ACCEPTED) == set(), (
        "new locking hazards: fix the migration (CONCURRENTLY, NOT VALID...)")
    assert set(ACCEPTED) - found == set(), "an accepted hazard is gone: remove its entry"


@pytest.mark.database_blind
def test_squawk_flags_an_index_built_without_concurrently(tmp_path):
    """The linter itself is alive: the hazard the list guards against is found."""
    sql = 'CREATE INDEX "ix" ON "reports_reporttask" ("kind");'
    assert "require-concurrent-index-creation" in squawk_findings(sql, tmp_path / "plain.sql")
