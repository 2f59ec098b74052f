"""Causes that died before alerting remembered causes are not new: one CauseState each, first
seen at their oldest dead letter, with no open episode (so no resolved notice for the past)."""

from django.db import migrations
from django.db.models import Max, Min


def backfill(apps, schema_editor):
    DeadLetter = apps.get_model("deadletters", "DeadLetter")
    CauseState = apps.get_model("deadletters", "CauseState")
    rows = (
        DeadLetter.objects.values("fingerprint")
        .annotate(first=Min("created_at"), last=Max("created_at"))
        .order_by()
    )
    batch = []
    for row in rows.iterator(chunk_size=2000):
        batch.append(CauseState(fingerprint=row["fingerprint"], first_seen_at=row["first"], last_death_at=row["last"]))
        if len(batch) >= 2000:
            CauseState.objects.bulk_create(batch, ignore_conflicts=True)
            batch = []
    CauseState.objects.bulk_create(batch, ignore_conflicts=True)


class Migration(migrations.Migration):
    dependencies = [("deadletters", "0006_alert_channels")]
    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
