"""What the dead-letter layer does when the pipeline announces something (reports.signals).
Connected in DeadLettersConfig.ready."""

from django.dispatch import receiver

from deadletters.services.letters import create_dead_letter
from reports.signals import task_died


@receiver(task_died, dispatch_uid="deadletters.create_dead_letter")
def _on_task_died(sender, *, task, failure, **kwargs) -> None:
    create_dead_letter(task=task, failure=failure)

