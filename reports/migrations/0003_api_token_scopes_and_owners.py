"""API tokens get scopes; tasks and batches get the token that submitted them; idempotency keys
become unique per owner (a partial unique index for token-owned rows, another for owner-less ones).

Tokens that exist before this migration could call every endpoint. They get submit, read and replay:
what they did before on their own tasks, and no longer on other clients' ("operator" is never given
implicitly; grant it by making a new token). Their earlier tasks and batches become theirs again,
recognised by `submitted_by = "token:<name>"`, which the API wrote for every token submit.
"""

import django.db.models.deletion
from django.db import migrations, models


PRE_SCOPE_TOKEN_SCOPES = ["submit", "read", "replay"]


def give_existing_tokens_scopes_and_their_tasks(apps, schema_editor):
    ApiToken = apps.get_model("reports", "ApiToken")
    ReportTask = apps.get_model("reports", "ReportTask")
    ReportBatch = apps.get_model("reports", "ReportBatch")
    ApiToken.objects.update(scopes=PRE_SCOPE_TOKEN_SCOPES)
    for token_id, name in ApiToken.objects.values_list("id", "name"):
        submitted_by = f"token:{name}"[:150]
        ReportTask.objects.filter(submitted_by=submitted_by, owner=None).update(owner_id=token_id)
        ReportBatch.objects.filter(submitted_by=submitted_by, owner=None).update(owner_id=token_id)


class Migration(migrations.Migration):

    dependencies = [
        ('reports', '0002_attempts_before_run'),
    ]

    operations = [
        migrations.AddField(
            model_name='apitoken',
            name='scopes',
            field=models.JSONField(default=list),
        ),
        migrations.AddField(
            model_name='reportbatch',
            name='owner',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='batches', to='reports.apitoken'),
        ),
        migrations.AddField(
            model_name='reporttask',
            name='owner',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='tasks', to='reports.apitoken'),
        ),
        migrations.AlterField(
            model_name='reportbatch',
            name='idempotency_key',
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AlterField(
            model_name='reporttask',
            name='idempotency_key',
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddConstraint(
            model_name='reportbatch',
            constraint=models.UniqueConstraint(condition=models.Q(('owner__isnull', False)), fields=('owner', 'idempotency_key'), name='batch_idempotency_per_client'),
        ),
        migrations.AddConstraint(
            model_name='reportbatch',
            constraint=models.UniqueConstraint(condition=models.Q(('owner__isnull', True)), fields=('idempotency_key',), name='batch_idempotency_ownerless'),
        ),
        migrations.AddConstraint(
            model_name='reporttask',
            constraint=models.UniqueConstraint(condition=models.Q(('owner__isnull', False)), fields=('owner', 'idempotency_key'), name='task_idempotency_per_client'),
        ),
        migrations.AddConstraint(
            model_name='reporttask',
            constraint=models.UniqueConstraint(condition=models.Q(('owner__isnull', True)), fields=('idempotency_key',), name='task_idempotency_ownerless'),
        ),
        # Last: on PostgreSQL, rows updated before an ALTER TABLE of the same table in this transaction
        # would leave deferred foreign-key checks pending, which the ALTER refuses.
        migrations.RunPython(give_existing_tokens_scopes_and_their_tasks, migrations.RunPython.noop),
    ]
