"""Bulk actions that start at a time (start_at, status "scheduled") and bulk replays that try a
canary first (its size, the share that must succeed, its phase, deadline and frozen verdict).

The planner (`manage.py run_scheduled_replays --loop`) looks up due scheduled runs and canaries
awaiting a verdict twice a second: (status, start_at) serves both lookups. Statuses grow past ten
characters ("canary_failed")."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deadletters', '0009_open_letter_counts'),
    ]

    operations = [
        migrations.AddField(
            model_name='bulkaction',
            name='canary_deadline',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='bulkaction',
            name='canary_phase',
            field=models.CharField(blank=True, choices=[('', 'None'), ('pending', 'Pending'), ('running', 'Running'), ('passed', 'Passed'), ('failed', 'Failed')], default='', max_length=8),
        ),
        migrations.AddField(
            model_name='bulkaction',
            name='canary_result',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='bulkaction',
            name='canary_size',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='bulkaction',
            name='canary_success',
            field=models.FloatField(default=0),
        ),
        migrations.AddField(
            model_name='bulkaction',
            name='start_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='bulkaction',
            name='status',
            field=models.CharField(choices=[('scheduled', 'Scheduled'), ('pending', 'Pending'), ('running', 'Running'), ('canary', 'Canary'), ('paused', 'Paused'), ('completed', 'Completed'), ('cancelled', 'Cancelled'), ('failed', 'Failed'), ('canary_failed', 'Canary Failed')], default='pending', max_length=16),
        ),
        migrations.AddIndex(
            model_name='bulkaction',
            index=models.Index(fields=['status', 'start_at'], name='bulk_status_start_at'),
        ),
    ]
