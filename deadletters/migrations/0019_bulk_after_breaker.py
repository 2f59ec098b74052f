from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deadletters", "0018_bulk_params_patch"),
    ]

    operations = [
        migrations.AddField(
            model_name="bulkaction",
            name="after_breaker_of",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
    ]
