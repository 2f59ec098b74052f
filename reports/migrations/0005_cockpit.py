"""Cancelled tasks and stopped attempts (operator controls), the counters /metrics reads, and an
index on attempts' finished_at for the metrics' recent window (built CONCURRENTLY on PostgreSQL:
the attempts table is the largest the workers write)."""

from django.db import migrations, models

from reports.migration_operations import AddIndexAnywhere


class Migration(migrations.Migration):
    atomic = False  # CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("reports", "0004_submit_operator_kinds_permission"),
    ]

    operations = [
        migrations.CreateModel(
            name="TaskCounter",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("kind", models.CharField(max_length=64)),
                ("event", models.CharField(max_length=20)),
                ("count", models.BigIntegerField(default=0)),
                ("counted_through", models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.AlterField(
            model_name="reporttask",
            name="status",
            field=models.CharField(
                choices=[
                    ("pending", "Pending"),
                    ("running", "Running"),
                    ("retrying", "Retrying"),
                    ("done", "Done"),
                    ("dead", "Dead"),
                    ("cancelled", "Cancelled"),
                ],
                default="pending",
                max_length=10,
            ),
        ),
        migrations.AlterField(
            model_name="taskattempt",
            name="outcome",
            field=models.CharField(
                choices=[
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("timeout", "Timeout"),
                    ("abandoned", "Abandoned"),
                    ("stopped", "Stopped"),
                ],
                default="running",
                max_length=10,
            ),
        ),
        AddIndexAnywhere(
            model_name="taskattempt",
            index=models.Index(fields=["finished_at"], name="attempt_finished_at"),
        ),
        migrations.AddConstraint(
            model_name="taskcounter",
            constraint=models.UniqueConstraint(fields=("kind", "event"), name="task_counter_kind_event"),
        ),
    ]
