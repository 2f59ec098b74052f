"""RQ entry point for bulk actions; the work is in deadletters.bulk.runner."""

import logging

from deadletters.bulk.runner import run_bulk_action

logger = logging.getLogger(__name__)


def run_bulk_action_job(bulk_id=None, *args, **kwargs) -> str:
    if args or kwargs or type(bulk_id) is not int:
        logger.error("dropped malformed bulk job payload bulk_id=%r", bulk_id)
        return "malformed"
    return run_bulk_action(bulk_id)
