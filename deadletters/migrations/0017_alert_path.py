"""The alert path proves itself: one row per channel for its heartbeat ping and daily digest
(deadletters.models.AlertPath), and the digest's alert category (no SQL: choices only)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deadletters', '0016_cause_lifecycle'),
    ]

    operations = [
        migrations.CreateModel(
            name='AlertPath',
            fields=[
                ('id', models.BigAutoField(
                    auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('channel', models.CharField(max_length=40, unique=True)),
                ('pinged_at', models.DateTimeField(blank=True, null=True)),
                ('digest_day', models.DateField(blank=True, null=True)),
            ],
        ),
        migrations.AlterField(
            model_name='alert',
            name='category',
            field=models.CharField(
                choices=[('dead_letter', 'Dead Letter'), ('batch_summary', 'Batch Summary'), ('test', 'Test'),
                         ('resolved', 'Resolved'), ('daily_digest', 'Daily Digest')],
                default='dead_letter', max_length=20,
            ),
        ),
    ]
