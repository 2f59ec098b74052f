"""Old dotted paths of RQ jobs, kept importable for one release (until 0.3): jobs enqueued before
the upgrade name `deadletters.jobs.send_alerts_job` and `deadletters.jobs_bulk.run_bulk_action_job`
and must still run after it. New jobs name deadletters.alerts.jobs and deadletters.bulk.jobs."""

from deadletters.alerts.jobs import send_alerts_job

__all__ = ["send_alerts_job"]
