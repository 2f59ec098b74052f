from django.db import migrations, models

from reports.migration_operations import AddIndexAnywhere, RemoveIndexAnywhere


class Migration(migrations.Migration):
    # The indexes are built CONCURRENTLY on PostgreSQL: the alert table grows with every death and
    # a dying transaction writes to it, so a plain CREATE INDEX would stall the workers meanwhile.
    atomic = False
    dependencies = [("deadletters", "0011_one_alert_stack")]

    operations = [
        migrations.DeleteModel(name="AlertDelivery"),
        migrations.DeleteModel(name="ChannelMessage"),
        RemoveIndexAnywhere(model_name="alertmessage", name="alertmsg_status_next"),
        AddIndexAnywhere(
            model_name="alertmessage",
            index=models.Index(fields=["channel", "status", "next_attempt_at"], name="alertmsg_channel_next"),
        ),
        AddIndexAnywhere(
            model_name="alert",
            index=models.Index(fields=["channel", "status", "id"], name="alert_channel_status"),
        ),
        AddIndexAnywhere(
            model_name="alert",
            index=models.Index(fields=["fingerprint", "channel"], name="alert_fingerprint_channel"),
        ),
    ]
