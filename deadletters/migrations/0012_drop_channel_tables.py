from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("deadletters", "0011_one_alert_stack")]

    operations = [
        migrations.DeleteModel(name="AlertDelivery"),
        migrations.DeleteModel(name="ChannelMessage"),
        migrations.RemoveIndex(model_name="alertmessage", name="alertmsg_status_next"),
        migrations.AddIndex(
            model_name="alertmessage",
            index=models.Index(fields=["channel", "status", "next_attempt_at"], name="alertmsg_channel_next"),
        ),
        migrations.AddIndex(
            model_name="alert",
            index=models.Index(fields=["channel", "status", "id"], name="alert_channel_status"),
        ),
        migrations.AddIndex(
            model_name="alert",
            index=models.Index(fields=["fingerprint", "channel"], name="alert_fingerprint_channel"),
        ),
    ]
