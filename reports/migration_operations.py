"""Operations the project's migrations share (kept out of the migration files, which should not
import one another)."""

from django.db import migrations


class AddIndexAnywhere(migrations.AddIndex):
    """CREATE INDEX CONCURRENTLY on PostgreSQL (no lock on writes to a big table while it builds),
    the ordinary AddIndex elsewhere. The migration using it must set `atomic = False`."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        schema_editor.add_index(model, self.index, concurrently=True)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        model = from_state.apps.get_model(app_label, self.model_name)
        schema_editor.remove_index(model, self.index, concurrently=True)


class RemoveIndexAnywhere(migrations.RemoveIndex):
    """DROP INDEX CONCURRENTLY on PostgreSQL, the ordinary RemoveIndex elsewhere (`atomic = False`)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = from_state.apps.get_model(app_label, self.model_name)
        index = from_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
        schema_editor.remove_index(model, index, concurrently=True)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        index = to_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
        schema_editor.add_index(model, index, concurrently=True)
