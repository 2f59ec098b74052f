"""What the dead-letter layer does when the pipeline announces something (reports.signals).
Connected in DeadLettersConfig.ready."""

from django.dispatch import receiver

from deadletters.services.kind_pauses import breaker_changed as on_breaker_changed
from deadletters.services.letters import create_dead_letter
from reports.signals import breaker_changed, task_died


@receiver(task_died, dispatch_uid="deadletters.create_dead_letter")
def _on_task_died(sender, *, task, failure, **kwargs) -> None:
    create_dead_letter(task=task, failure=failure)


@receiver(breaker_changed, dispatch_uid="deadletters.breaker_changed")
def _on_breaker_changed(sender, *, breaker, change, actor, waiting, **kwargs) -> None:
    on_breaker_changed(breaker=breaker, change=change, actor=actor, waiting=waiting)
