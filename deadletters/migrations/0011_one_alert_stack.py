"""One alert stack: the DingTalk robot becomes the channel "dingtalk" beside ALERT_CHANNELS.

Its rows keep their ids, statuses and msg_uuid (channel "dingtalk"; a skipped or muted one, which
no robot ever took, gets no channel). Each AlertDelivery of another channel becomes an Alert row
of that channel (a copy of its event, same creation time and status), and each ChannelMessage an
AlertMessage with the same msg_uuid, so whatever was queued is sent once by the one sender,
whatever was sent or failed stays so. The old tables go in 0012."""

from django.db import migrations, models

BATCH = 2000
EVENT_FIELDS = ("category", "dead_letter_id", "batch_id", "fingerprint", "payload", "created_at")
MESSAGE_FIELDS = (
    "channel",
    "msg_uuid",
    "is_digest",
    "title",
    "body",
    "status",
    "attempts",
    "next_attempt_at",
    "last_errcode",
    "last_error",
    "created_at",
    "sent_at",
)


def _walk(queryset):
    last = 0
    while True:
        rows = list(queryset.filter(pk__gt=last).order_by("pk")[:BATCH])
        if not rows:
            return
        yield rows
        last = rows[-1].pk


def forward(apps, schema_editor):
    Alert = apps.get_model("deadletters", "Alert")
    AlertMessage = apps.get_model("deadletters", "AlertMessage")
    AlertDelivery = apps.get_model("deadletters", "AlertDelivery")
    ChannelMessage = apps.get_model("deadletters", "ChannelMessage")
    AlertMessage.objects.update(channel="dingtalk")
    Alert.objects.exclude(status__in=("skipped", "muted")).update(channel="dingtalk")
    Alert.objects.filter(status="skipped", message__isnull=False).update(channel="dingtalk")
    new_message = {}
    for rows in _walk(ChannelMessage.objects.all()):
        made = AlertMessage.objects.bulk_create(
            [AlertMessage(**{f: getattr(row, f) for f in MESSAGE_FIELDS}) for row in rows]
        )
        if any(m.pk is None for m in made):  # a backend that returns no ids: look them up
            ids = dict(
                AlertMessage.objects.filter(msg_uuid__in=[r.msg_uuid for r in rows]).values_list(
                    "msg_uuid", "pk"
                )
            )
            new_message.update((row.pk, ids[row.msg_uuid]) for row in rows)
        else:
            new_message.update((row.pk, m.pk) for row, m in zip(rows, made, strict=True))
    reused = set()
    for rows in _walk(AlertDelivery.objects.select_related("alert")):
        fresh = []
        for delivery in rows:
            alert = delivery.alert
            values = {
                "channel": delivery.channel,
                "status": delivery.status,
                "message_id": new_message.get(delivery.message_id),
            }
            if alert.channel == "" and alert.status == "skipped" and alert.pk not in reused:
                # The robot skipped it (none configured): this row becomes the channel's delivery.
                reused.add(alert.pk)
                Alert.objects.filter(pk=alert.pk).update(**values)
                continue
            fresh.append(Alert(**{f: getattr(alert, f) for f in EVENT_FIELDS}, **values))
        Alert.objects.bulk_create(fresh)


class Migration(migrations.Migration):
    dependencies = [("deadletters", "0010_bulk_canary_schedule")]

    operations = [
        migrations.AddField(
            model_name="alert",
            name="channel",
            field=models.CharField(blank=True, default="", max_length=40),
        ),
        migrations.AddField(
            model_name="alertmessage",
            name="channel",
            field=models.CharField(default="", max_length=40),
        ),
        migrations.RunPython(forward, migrations.RunPython.noop),
    ]
