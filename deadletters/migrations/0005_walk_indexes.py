"""Indexes the archiver and the purge walk: (expire_at, id) of open letters and (archived_at, id)
of archived ones.

Each batch of archive_deadletters is a keyset step `(basis, id) > (last row) ORDER BY basis, id
LIMIT n`; with id in the index that is an index range scan of n rows even when a million due
letters share one expire_at (the old (status, expire_at) index made every batch sort all of
them). Partial: a letter archived leaves the first without an index insert (an update that moves
a row out of a partial index writes nothing to it), so the walk indexes cost a state change only
when the letter enters them. Built CONCURRENTLY on PostgreSQL so the migration never blocks writers.
"""

from django.db import migrations, models


class _Concurrently:
    """CREATE/DROP INDEX CONCURRENTLY on PostgreSQL, the ordinary operation elsewhere."""

    def _pg(self, schema_editor):
        return schema_editor.connection.vendor == "postgresql"


class AddIndexAnywhere(_Concurrently, migrations.AddIndex):
    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if not self._pg(schema_editor):
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        schema_editor.add_index(model, self.index, concurrently=True)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if not self._pg(schema_editor):
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        model = from_state.apps.get_model(app_label, self.model_name)
        schema_editor.remove_index(model, self.index, concurrently=True)


class RemoveIndexAnywhere(_Concurrently, migrations.RemoveIndex):
    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if not self._pg(schema_editor):
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = from_state.apps.get_model(app_label, self.model_name)
        index = from_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
        schema_editor.remove_index(model, index, concurrently=True)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if not self._pg(schema_editor):
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        index = to_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
        schema_editor.add_index(model, index, concurrently=True)


class Migration(migrations.Migration):
    atomic = False  # CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("deadletters", "0004_search_indexes"),
    ]

    operations = [
        AddIndexAnywhere(
            model_name="deadletter",
            index=models.Index(
                fields=["expire_at", "id"], name="dl_open_expire_id", condition=models.Q(status="open")
            ),
        ),
        AddIndexAnywhere(
            model_name="deadletter",
            index=models.Index(
                fields=["archived_at", "id"], name="dl_archived_at_id", condition=models.Q(status="archived")
            ),
        ),
        RemoveIndexAnywhere(model_name="deadletter", name="dl_status_expire"),
    ]
