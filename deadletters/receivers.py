"""What the dead-letter layer does when the pipeline announces something (reports.signals).
Connected in DeadLettersConfig.ready."""

from django.dispatch import receiver

from deadletters.alerts.outbox import enqueue_batch_summary_alert
from deadletters.alerts.resolved import announce_resolved_causes
from deadletters.alerts.snooze import announce_ended_snoozes
from deadletters.bulk.canary import decide_canaries
from deadletters.bulk.runner import resume_stalled_bulk_actions
from deadletters.bulk.schedule import promote_due_bulk_actions
from deadletters.services.letters import create_dead_letter
from reports.signals import batch_completed_with_dead, reaper_pass_finished, task_died


@receiver(task_died, dispatch_uid="deadletters.create_dead_letter")
def _on_task_died(sender, *, task, failure, **kwargs) -> None:
    create_dead_letter(task=task, failure=failure)


@receiver(batch_completed_with_dead, dispatch_uid="deadletters.batch_summary_alert")
def _on_batch_completed_with_dead(sender, *, batch, progress, **kwargs) -> None:
    enqueue_batch_summary_alert(
        batch=batch, total=progress.total, done=progress.done, dead=progress.dead, finished_at=batch.finished_at
    )


@receiver(reaper_pass_finished, dispatch_uid="deadletters.resume_stalled_bulk_actions")
def _on_reaper_pass_finished(sender, **kwargs) -> None:
    # Bulk console actions whose runner job was lost (killed worker, flushed Redis).
    resume_stalled_bulk_actions()
    # The planner's duties too, so a site without `run_scheduled_replays --loop` still starts
    # scheduled runs and decides canaries, within a reaper interval instead of a second.
    promote_due_bulk_actions()
    decide_canaries()


@receiver(reaper_pass_finished, dispatch_uid="deadletters.announce_resolved_causes")
def _announce_resolved_causes(sender, **kwargs) -> None:
    # The reaper runs every few seconds whatever happens; a quiet cause produces no other event.
    announce_resolved_causes()
    announce_ended_snoozes()
