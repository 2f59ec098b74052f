"""A cause's lifecycle: "fixed in the next release" on CauseState, its deaths per release
(CauseRelease), and snoozes that last until a threshold of deaths."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deadletters', '0015_cause_notes'),
    ]

    operations = [
        migrations.AddField(
            model_name='alertsnooze',
            name='deaths',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='alertsnooze',
            name='per_minute',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='alertsnooze',
            name='total',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='causestate',
            name='fixed_marked_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='causestate',
            name='fixed_marked_by',
            field=models.CharField(blank=True, max_length=150),
        ),
        migrations.AddField(
            model_name='causestate',
            name='fixed_marked_release',
            field=models.CharField(blank=True, max_length=100),
        ),
        migrations.AddField(
            model_name='causestate',
            name='fixed_release',
            field=models.CharField(blank=True, max_length=100),
        ),
        migrations.AddField(
            model_name='causestate',
            name='fixed_release_started',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='causestate',
            name='regressed_release',
            field=models.CharField(blank=True, max_length=100),
        ),
        migrations.CreateModel(
            name='CauseRelease',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('fingerprint', models.CharField(max_length=40)),
                ('release', models.CharField(max_length=100)),
                ('deaths', models.PositiveIntegerField(default=0)),
                ('last_death_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('fingerprint', 'release'), name='cause_release')],
            },
        ),
    ]
