"""RQ entry point of the alert sender. Thin: the work is deadletters.alerts.sender."""

import logging

from deadletters.alerts.outbox import KICK_KEY
from deadletters.alerts.sender import send_due_alerts
from transport.connection import redis_connection

logger = logging.getLogger("deadletters.alerts")


def send_alerts_job() -> str:
    """One send pass, kicked when an alert commits. Clears the kick key first so an alert
    committed while this pass runs gets a pass of its own."""
    redis_connection().delete(KICK_KEY)
    reports = send_due_alerts()
    for report in reports:
        if report.did_something or report.paused:
            logger.info("alert pass: %s", report.summary())
    return "; ".join(report.summary() for report in reports) or "no channel configured"
