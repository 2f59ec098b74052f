from django.apps import AppConfig


class DeadLettersConfig(AppConfig):
    name = "deadletters"
    verbose_name = "Dead letters"

    def ready(self) -> None:
        # A task's death reaches this layer as reports.signals.task_died, in the dying transaction.
        from deadletters import receivers  # noqa: F401
