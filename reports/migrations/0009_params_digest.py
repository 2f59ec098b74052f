"""Each task's kind, client and params as one hash, and an index to find the done tasks of one
(deadletters' supersession duty). Tasks submitted before keep NULL, which equals nothing; the
index is built CONCURRENTLY on PostgreSQL."""

from django.db import migrations, models

from reports.migration_operations import AddIndexAnywhere


class Migration(migrations.Migration):
    atomic = False  # CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("reports", "0008_kind_breaker"),
    ]

    operations = [
        migrations.AddField(
            model_name="reporttask",
            name="params_digest",
            field=models.CharField(blank=True, max_length=40, null=True),
        ),
        AddIndexAnywhere(
            model_name="reporttask",
            index=models.Index(fields=["params_digest", "status", "id"], name="task_params_digest"),
        ),
    ]
