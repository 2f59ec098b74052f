"""RQ entry point of the alert sender. Thin: the work is deadletters.alerts.sender."""

import logging

from deadletters.alerts.channels.sender import send_channel_alerts
from deadletters.alerts.outbox import KICK_KEY
from deadletters.alerts.resolved import announce_resolved_causes
from deadletters.alerts.sender import send_pending_alerts
from deadletters.alerts.snooze import announce_ended_snoozes
from transport.connection import redis_connection

logger = logging.getLogger("deadletters.alerts")


def send_alerts_job() -> str:
    """One send pass, kicked when a dead letter commits. Clears the kick key first so an alert
    committed while this pass runs gets a pass of its own."""
    redis_connection().delete(KICK_KEY)
    announce_resolved_causes()
    announce_ended_snoozes()
    report = send_pending_alerts()
    if report.did_something or report.paused:
        logger.info("alert pass: %s", report.summary())
    summaries = [report.summary()]
    for channel_report in send_channel_alerts():
        if channel_report.did_something or channel_report.paused:
            logger.info("alert pass: %s", channel_report.summary())
        summaries.append(channel_report.summary())
    return "; ".join(summaries)
