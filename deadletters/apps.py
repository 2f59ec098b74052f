from django.apps import AppConfig


class DeadLettersConfig(AppConfig):
    name = "deadletters"
    verbose_name = "Dead letters"

    def ready(self) -> None:
        # A task's death reaches this layer as reports.signals.task_died, in the dying transaction.
        from deadletters import receivers  # noqa: F401
        from deadletters.alerts.channels import configured_channels
        from deadletters.alerts.outbox import SEND_ALERTS_JOB_FUNC
        from deadletters.bulk.control import BULK_JOB_FUNC
        from deadletters.housekeeping import DUTIES
        from reports.housekeeper.duties import register
        from transport.registry import allow_job_functions

        allow_job_functions(SEND_ALERTS_JOB_FUNC, BULK_JOB_FUNC)
        register(*DUTIES)  # run by the housekeeper, which never imports this layer
        configured_channels()  # a malformed ALERT_CHANNELS fails start-up with its name
