"""The dead-letter layer's periodic duties, run by the housekeeper (reports/housekeeper/): added
to its list by DeadLettersConfig.ready, so the pipeline never imports this layer."""

from deadletters.alerts.channels.sender import send_channel_alerts
from deadletters.alerts.resolved import announce_resolved_causes
from deadletters.alerts.sender import send_pending_alerts
from deadletters.alerts.snooze import announce_ended_snoozes
from deadletters.bulk.canary import decide_canaries
from deadletters.bulk.runner import resume_stalled_bulk_actions
from deadletters.bulk.schedule import promote_due_bulk_actions
from reports.housekeeper.duties import Duty


def announce_quiet_causes() -> int:
    """A cause that stopped dying and a snooze that ended produce no event of their own."""
    return announce_resolved_causes() + announce_ended_snoozes()


def send_due_alerts() -> str:
    """The backstop of the sender kicked on commit (deadletters/alerts/outbox.py): a lost kick, a
    resend whose backoff ran out, a robot whose pause ended. Says what each channel did."""
    return "; ".join(report.summary() for report in [send_pending_alerts(), *send_channel_alerts()])


DUTIES = (
    # Scheduled runs start within a second of their time; canaries carry on once certain.
    Duty("scheduled runs", 0.5, promote_due_bulk_actions),
    Duty("canary verdicts", 0.5, decide_canaries),
    # Bulk actions whose runner job was lost (killed worker, flushed Redis).
    Duty("stalled bulk actions", 10, resume_stalled_bulk_actions),
    Duty("resolved and snoozed causes", 5, announce_quiet_causes),
    Duty("alerts", 5, send_due_alerts),
)
