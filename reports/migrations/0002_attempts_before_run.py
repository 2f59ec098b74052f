from django.conf import settings
from django.db import migrations, models
from django.db.models import F


def estimate_runs_of_replayed_tasks(apps, schema_editor):
    # Tasks replayed before this column existed: their run began REPORT_MAX_ATTEMPTS attempts
    # before their budget's end (the budget a replay grants).
    ReportTask = apps.get_model("reports", "ReportTask")
    budget = settings.REPORT_MAX_ATTEMPTS
    ReportTask.objects.filter(max_attempts__gt=budget).update(attempts_before_run=F("max_attempts") - budget)


class Migration(migrations.Migration):
    dependencies = [("reports", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="reporttask",
            name="attempts_before_run",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(estimate_runs_of_replayed_tasks, migrations.RunPython.noop),
    ]
