from django.db import migrations, models

OUTCOMES = [
    ("running", "Running"), ("succeeded", "Succeeded"), ("failed", "Failed"), ("timeout", "Timeout"),
    ("abandoned", "Abandoned"), ("stopped", "Stopped"), ("infra", "Infra"),
]


class Migration(migrations.Migration):
    dependencies = [("reports", "0006_chart_indexes")]

    operations = [
        migrations.AddField(
            model_name="reporttask",
            name="waiting_for",
            field=models.CharField(blank=True, max_length=8, null=True),
        ),
        migrations.AddField(
            model_name="reporttask", name="waiting_since", field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="taskattempt",
            name="outcome",
            field=models.CharField(choices=OUTCOMES, default="running", max_length=10),
        ),
    ]
