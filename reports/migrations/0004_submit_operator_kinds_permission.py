from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("reports", "0003_api_token_scopes_and_owners")]

    operations = [
        migrations.AlterModelOptions(
            name="reporttask",
            options={"permissions": [("submit_operator_kinds", "Can submit operator-only report kinds (the probe)")]},
        ),
    ]
