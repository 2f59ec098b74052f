"""A bulk replay may carry a params patch (set, replace, remove keys) applied to every task it
replays; letters whose patched params their kind refuses are counted and the first kept with their
reasons. Bulk runs: tens of rows, and each column is added with a constant default (no rewrite)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deadletters', '0017_alert_path'),
    ]

    operations = [
        migrations.AddField(
            model_name='bulkaction',
            name='params_patch',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='bulkaction',
            name='refused',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='bulkaction',
            name='refusals',
            field=models.JSONField(blank=True, default=list),
        ),
    ]
