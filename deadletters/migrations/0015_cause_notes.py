"""A runbook note on each cause (fingerprint): text per language, links, who wrote it and when."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deadletters', '0014_params_permission'),
    ]

    operations = [
        migrations.AddField('causestate', 'note_at', models.DateTimeField(blank=True, null=True)),
        migrations.AddField('causestate', 'note_by', models.CharField(blank=True, max_length=150)),
        migrations.AddField('causestate', 'note_links', models.JSONField(blank=True, default=list)),
        migrations.AddField('causestate', 'note_text', models.JSONField(blank=True, default=dict)),
    ]
