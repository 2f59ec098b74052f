"""Old dotted path of the bulk-action job, kept importable for one release (until 0.3): see
deadletters/jobs.py. New jobs name deadletters.bulk.jobs.run_bulk_action_job."""

from deadletters.bulk.jobs import run_bulk_action_job

__all__ = ["run_bulk_action_job"]
