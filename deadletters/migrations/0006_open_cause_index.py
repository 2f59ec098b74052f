"""An index /metrics counts open letters from: (kind, fingerprint) of open letters, so open letters
by kind and by cause are one index-only scan. Partial, as the walk indexes are (0005): a letter
leaving `open` costs it no insert. Built CONCURRENTLY on PostgreSQL so it never blocks writers."""

import importlib

from django.db import migrations, models

AddIndexAnywhere = importlib.import_module("deadletters.migrations.0005_walk_indexes").AddIndexAnywhere


class Migration(migrations.Migration):
    atomic = False  # CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("deadletters", "0005_walk_indexes"),
    ]

    operations = [
        AddIndexAnywhere(
            model_name="deadletter",
            index=models.Index(
                fields=["kind", "fingerprint"],
                name="dl_open_kind_fingerprint",
                condition=models.Q(status="open"),
            ),
        ),
    ]
