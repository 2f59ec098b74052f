"""Superseded dead letters: a letter whose kind and params (for the same client) later ended done in
another task leaves the open ones (the triggers of 0009 count status 'open' only) and names that
task. No constraint and no index on the link: nothing looks letters up by it, and retention may
delete the task."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("deadletters", "0019_bulk_after_breaker"),
        ("reports", "0009_params_digest"),
    ]

    operations = [
        migrations.AddField(
            model_name="deadletter",
            name="superseded_by",
            field=models.ForeignKey(
                blank=True, db_constraint=False, db_index=False, null=True,
                on_delete=django.db.models.deletion.DO_NOTHING, related_name="+", to="reports.reporttask",
            ),
        ),
        migrations.AlterField(
            model_name="deadletter",
            name="status",
            field=models.CharField(
                choices=[("open", "Open"), ("replayed", "Replayed"), ("archived", "Archived"),
                         ("discarded", "Discarded"), ("superseded", "Superseded")],
                default="open", max_length=10,
            ),
        ),
    ]
