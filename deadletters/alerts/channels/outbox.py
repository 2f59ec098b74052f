"""Fan-out: inside the transaction that writes an Alert, one AlertDelivery per channel whose
routing rules take it. The DingTalk robot keeps its own columns on Alert (deadletters.alerts.outbox)."""

from deadletters.alerts.channels.config import routed_channels
from deadletters.models import Alert, AlertCategory, AlertDelivery

_EVENTS = {
    AlertCategory.DEAD_LETTER: "death",
    AlertCategory.BATCH_SUMMARY: "batch",
    AlertCategory.RESOLVED: "resolved",
    AlertCategory.TEST: "test",
}


def channels_for(alert: Alert) -> list:
    payload = alert.payload or {}
    return routed_channels(
        event=_EVENTS.get(alert.category, "death"),
        kind=str(payload.get("kind", "")),
        new=bool(payload.get("new")),
    )


def fan_out(alerts: list[Alert]) -> int:
    """Delivery rows for saved alerts; returns how many were written."""
    rows = [
        AlertDelivery(alert=alert, channel=channel.name)
        for alert in alerts
        for channel in channels_for(alert)
    ]
    AlertDelivery.objects.bulk_create(rows, batch_size=2000)
    return len(rows)
