"""An index on the start time of first attempts, for the console's queue-wait chart (the first
attempts that started in the last 24 hours: a range of this index instead of a walk through every
attempt, or through every task of a kind). Partial, so retries add nothing to it; built
CONCURRENTLY on PostgreSQL, as 0005's index on finished_at is."""

from django.db import migrations, models


class AddIndexAnywhere(migrations.AddIndex):
    """CREATE INDEX CONCURRENTLY on PostgreSQL, the ordinary AddIndex elsewhere."""

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


class Migration(migrations.Migration):
    atomic = False  # CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("reports", "0005_cockpit"),
    ]

    operations = [
        AddIndexAnywhere(
            model_name="taskattempt",
            index=models.Index(condition=models.Q(number=1), fields=["started_at"], name="attempt_first_started"),
        ),
    ]
