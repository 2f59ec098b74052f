from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "reports"
    verbose_name = "Report tasks"

    def ready(self) -> None:
        from reports.services.enqueue import BATCH_FAN_OUT_FUNC, REPORT_JOB_FUNC
        from transport.registry import allow_job_functions

        allow_job_functions(REPORT_JOB_FUNC, BATCH_FAN_OUT_FUNC)
