from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reports", "0007_infra_waits"),
    ]

    operations = [
        migrations.CreateModel(
            name="KindBreaker",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(max_length=64, unique=True)),
                (
                    "state",
                    models.CharField(
                        choices=[("closed", "Closed"), ("open", "Open"), ("half_open", "Half Open"),
                                 ("held", "Held")],
                        default="closed",
                        max_length=10,
                    ),
                ),
                ("failures_to_open", models.PositiveIntegerField()),
                ("window_seconds", models.PositiveIntegerField()),
                ("probes_to_close", models.PositiveIntegerField()),
                ("failures", models.PositiveIntegerField(default=0)),
                ("window_started_at", models.DateTimeField(blank=True, null=True)),
                ("passing_probes", models.PositiveIntegerField(default=0)),
                ("probed_at", models.DateTimeField(blank=True, null=True)),
                ("opened_at", models.DateTimeField(blank=True, null=True)),
                ("half_open_at", models.DateTimeField(blank=True, null=True)),
                ("changed_by", models.CharField(blank=True, max_length=150)),
                ("changed_at", models.DateTimeField(blank=True, null=True)),
            ],
        ),
    ]
