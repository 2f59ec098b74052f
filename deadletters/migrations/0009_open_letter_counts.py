"""Open dead letters per (kind, fingerprint), kept by triggers on the dead-letter table.

/metrics shows open letters by kind and by cause; counting them at scrape time is a scan of
every open letter (a million: hundreds of milliseconds). Triggers keep the counts in the
transaction of each change instead, whoever makes it (services, bulk actions, the archiver's and
the purge's raw statements, COPY):

- PostgreSQL: statement-level triggers with transition tables, one upsert per (kind, fingerprint)
  a statement touches, in key order (so two statements never take the rows' locks crosswise);
- SQLite: row-level triggers.

The counts are filled from the table in the same transaction that creates the triggers, under a
lock that holds writers off for that moment (on PostgreSQL a SHARE ROW EXCLUSIVE lock: readers go on).
"""

from django.db import migrations, models

DL = "deadletters_deadletter"
COUNTS = "deadletters_openlettercount"

# A fingerprint hashes its error type with the message: one error type per fingerprint.
_UPSERT = (
    f"INSERT INTO {COUNTS} (kind, fingerprint, error_type, count) {{select}} "
    f"ON CONFLICT (kind, fingerprint) DO UPDATE SET count = {COUNTS}.count + excluded.count"
)
_DELTA = (
    "SELECT kind, fingerprint, max(error_type), sum(delta) FROM ({rows}) changed "
    "GROUP BY kind, fingerprint HAVING sum(delta) <> 0 ORDER BY kind, fingerprint"
)
_NEW = "SELECT kind, fingerprint, error_type, 1 AS delta FROM new_rows WHERE status = 'open'"
_OLD = "SELECT kind, fingerprint, error_type, -1 AS delta FROM old_rows WHERE status = 'open'"

PG_FORWARD = [
    f"LOCK TABLE {DL} IN SHARE ROW EXCLUSIVE MODE",
    *(
        f"""CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN {_UPSERT.format(select=_DELTA.format(rows=rows))}; RETURN NULL; END $$"""
        for name, rows in (
            ("dl_open_count_insert", _NEW),
            ("dl_open_count_update", f"{_OLD} UNION ALL {_NEW}"),
            ("dl_open_count_delete", _OLD),
        )
    ),
    f"""CREATE TRIGGER dl_open_count_insert AFTER INSERT ON {DL} REFERENCING NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION dl_open_count_insert()""",
    f"""CREATE TRIGGER dl_open_count_update AFTER UPDATE ON {DL}
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION dl_open_count_update()""",
    f"""CREATE TRIGGER dl_open_count_delete AFTER DELETE ON {DL} REFERENCING OLD TABLE AS old_rows
        FOR EACH STATEMENT EXECUTE FUNCTION dl_open_count_delete()""",
    f"""INSERT INTO {COUNTS} (kind, fingerprint, error_type, count)
        SELECT kind, fingerprint, max(error_type), count(*) FROM {DL} WHERE status = 'open' GROUP BY kind, fingerprint""",
]
PG_BACKWARD = [
    f"DROP TRIGGER IF EXISTS dl_open_count_insert ON {DL}",
    f"DROP TRIGGER IF EXISTS dl_open_count_update ON {DL}",
    f"DROP TRIGGER IF EXISTS dl_open_count_delete ON {DL}",
    "DROP FUNCTION IF EXISTS dl_open_count_insert()",
    "DROP FUNCTION IF EXISTS dl_open_count_update()",
    "DROP FUNCTION IF EXISTS dl_open_count_delete()",
]

_SQLITE_ADD = (
    f"INSERT INTO {COUNTS} (kind, fingerprint, error_type, count) "
    "SELECT NEW.kind, NEW.fingerprint, NEW.error_type, 1 WHERE NEW.status = 'open' "
    "ON CONFLICT (kind, fingerprint) DO UPDATE SET count = count + 1;"
)
_SQLITE_REMOVE = (
    f"UPDATE {COUNTS} SET count = count - 1 WHERE OLD.status = 'open' AND kind = OLD.kind "
    "AND fingerprint = OLD.fingerprint;"
)
SQLITE_FORWARD = [
    f"CREATE TRIGGER dl_open_count_insert AFTER INSERT ON {DL} WHEN NEW.status = 'open' BEGIN {_SQLITE_ADD} END",
    f"CREATE TRIGGER dl_open_count_update AFTER UPDATE OF status, kind, fingerprint ON {DL} "
    f"WHEN OLD.status = 'open' OR NEW.status = 'open' BEGIN {_SQLITE_REMOVE} {_SQLITE_ADD} END",
    f"CREATE TRIGGER dl_open_count_delete AFTER DELETE ON {DL} WHEN OLD.status = 'open' BEGIN {_SQLITE_REMOVE} END",
    f"""INSERT INTO {COUNTS} (kind, fingerprint, error_type, count)
        SELECT kind, fingerprint, max(error_type), count(*) FROM {DL} WHERE status = 'open' GROUP BY kind, fingerprint""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS dl_open_count_insert",
    "DROP TRIGGER IF EXISTS dl_open_count_update",
    "DROP TRIGGER IF EXISTS dl_open_count_delete",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        statements = statements_by_vendor.get(schema_editor.connection.vendor)
        if statements is None:
            raise RuntimeError(f"no open-letter count triggers for {schema_editor.connection.vendor}")
        for statement in statements:
            schema_editor.execute(statement, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("deadletters", "0008_alert_snooze"),
    ]

    operations = [
        migrations.CreateModel(
            name="OpenLetterCount",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(max_length=64)),
                ("fingerprint", models.CharField(max_length=40)),
                ("error_type", models.CharField(max_length=200, blank=True)),
                ("count", models.BigIntegerField(default=0)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("kind", "fingerprint"), name="open_letter_count_kind_fingerprint"
                    )
                ],
            },
        ),
        migrations.RunPython(
            _run({"postgresql": PG_FORWARD, "sqlite": SQLITE_FORWARD}),
            _run({"postgresql": PG_BACKWARD, "sqlite": SQLITE_BACKWARD}),
            elidable=False,
        ),
    ]
