"""RQ entry points for the deadletters app. Thin: the workflow lives in services."""

import logging

from deadletters.services import alerts as alert_services
from reports import queueing

logger = logging.getLogger("deadletters.alerts")


def send_alerts_job() -> str:
    """One send pass, kicked when a dead letter commits. Clears the kick key first so an alert
    committed while this pass runs gets a pass of its own."""
    queueing.redis_connection().delete(alert_services.KICK_KEY)
    report = alert_services.send_pending_alerts()
    if report.did_something or report.paused:
        logger.info("alert pass: %s", report.summary())
    return report.summary()
