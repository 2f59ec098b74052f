"""Free-text search in dead-letter messages served by a trigram index on PostgreSQL.

The console's and the API's search (deadletters.filters.search_condition) match
`UPPER(error_message) LIKE UPPER('%text%')`, which is what Django's icontains writes; a GIN
index over UPPER(error_message) with gin_trgm_ops answers it from the index. It covers open
letters only (what the API lists and the console shows by default): a GIN insert per row version
would otherwise cost every archive, replay and discard of a letter about as much again as the
rest of the update; a text search among archived or replayed letters scans instead. Built CONCURRENTLY
so a migration on a live table of a million letters never blocks the workers writing to it.

pg_trgm ships with PostgreSQL (contrib) and is a trusted extension since PostgreSQL 13: a
database owner can create it without being a superuser (RDS, Cloud SQL and Azure allow it). If
the migration's user may not, the index is skipped with a warning naming the command a DBA
runs; search stays correct, only slower. On SQLite this migration does nothing.
"""

import sys

from django.db import DatabaseError, migrations

INDEX = "dl_error_message_trgm"


def create_trigram_index(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    table = schema_editor.quote_name(apps.get_model("deadletters", "DeadLetter")._meta.db_table)
    with connection.cursor() as cursor:
        try:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        except DatabaseError as exc:
            sys.stderr.write(
                f"\nWARNING: pg_trgm could not be created ({exc}); dead-letter text search will scan "
                "the table. Have a database owner run: CREATE EXTENSION pg_trgm; then "
                "`manage.py migrate deadletters 0002 && manage.py migrate`.\n"
            )
            return
        cursor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} ON {table} "
            "USING gin (UPPER(error_message) gin_trgm_ops) WHERE status = 'open'"
        )


def drop_trigram_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("deadletters", "0003_replay_edit_permission"),
    ]

    operations = [
        migrations.RunPython(create_trigram_index, drop_trigram_index, elidable=False),
    ]
