"""An index on the start time of first attempts, for the console's queue-wait chart (the first
attempts that started in the last 24 hours: a range of this index instead of a walk through every
attempt, or through every task of a kind). Partial, so retries add nothing to it; built
CONCURRENTLY on PostgreSQL, as 0005's index on finished_at is."""

from django.db import migrations, models

from reports.migration_operations import AddIndexAnywhere


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
