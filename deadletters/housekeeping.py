"""The dead-letter layer's periodic duties, run by the housekeeper (reports/housekeeper/): added
to its list by DeadLettersConfig.ready, so the pipeline never imports this layer."""

from deadletters.alerts.digest import daily_digests_send
from deadletters.alerts.heartbeat import heartbeats_ping
from deadletters.alerts.outbox import batch_summaries_write
from deadletters.alerts.sender import send_due_alerts
from deadletters.bulk.canary import decide_canaries
from deadletters.bulk.runner import resume_stalled_bulk_actions
from deadletters.bulk.schedule import promote_due_bulk_actions
from deadletters.services.cause_lifecycle import release_replay_fixed_causes
from deadletters.services.retention import data_prune
from deadletters.services.supersession import letters_supersede
from reports.housekeeper.duties import Duty


def alerts_send() -> str:
    """The backstop of the sender kicked on commit (deadletters/alerts/outbox.py): a lost kick, a
    resend whose backoff ran out, a channel back up, a follow-up due, a cause gone quiet, a snooze
    ended. Says what each channel did."""
    return "; ".join(report.summary() for report in send_due_alerts())


def alert_path() -> str:
    """The alert path proves itself: each channel's daily digest when its time has come, and its
    dead-man's switch pinged while it delivers (deadletters/alerts/digest.py, heartbeat.py)."""
    return "; ".join(daily_digests_send() + heartbeats_ping()) or "nothing due"


def data_retention() -> str:
    """What RETENTION_DAYS says is old enough goes (deadletters/services/retention.py)."""
    deleted = data_prune().deleted.items()
    return ", ".join(f"{what} {count}" for what, count in deleted if count) or "nothing old"


DUTIES = (
    # Scheduled runs start within a second of their time; canaries carry on once certain.
    Duty("scheduled runs", 0.5, promote_due_bulk_actions),
    Duty("canary verdicts", 0.5, decide_canaries),
    # Bulk actions whose runner job was lost (killed worker, flushed Redis).
    Duty("stalled bulk actions", 10, resume_stalled_bulk_actions),
    # One summary per batch that completed with dead tasks (reports/services/batches.py completes).
    Duty("batch summaries", 5, batch_summaries_write),
    # Causes marked fixed in the next release: a canary replay once this process's release is new.
    Duty("fixed causes", 10, release_replay_fixed_causes),
    Duty("alerts", 5, alerts_send),
    Duty("alert path", 5, alert_path),
    Duty("retention", 600, data_retention),
    # Open letters a later done task of the same report made moot (one UPDATE per batch).
    Duty("supersession", 300, lambda: f"{letters_supersede()} superseded"),
)
