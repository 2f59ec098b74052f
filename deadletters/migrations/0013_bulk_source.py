"""Where a bulk run was started (console or API): the audit entry of each letter it touches says so."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deadletters', '0012_drop_channel_tables'),
    ]

    operations = [
        migrations.AddField(
            model_name='bulkaction',
            name='source',
            field=models.CharField(default='console', max_length=20),
        ),
    ]
