"""What the dead-letter layer does when the pipeline announces something (reports.signals).
Connected in DeadLettersConfig.ready."""

from django.dispatch import receiver

from deadletters.alerts.outbox import enqueue_batch_summary_alert
from deadletters.services.letters import create_dead_letter
from reports.signals import batch_completed_with_dead, task_died


@receiver(task_died, dispatch_uid="deadletters.create_dead_letter")
def _on_task_died(sender, *, task, failure, **kwargs) -> None:
    create_dead_letter(task=task, failure=failure)


@receiver(batch_completed_with_dead, dispatch_uid="deadletters.batch_summary_alert")
def _on_batch_completed_with_dead(sender, *, batch, progress, **kwargs) -> None:
    enqueue_batch_summary_alert(
        batch=batch, total=progress.total, done=progress.done, dead=progress.dead,
        finished_at=batch.finished_at,
    )

