"""What RQ holds right now, for the dashboard: queue registries and live workers."""

import logging
from datetime import datetime

from django.conf import settings
from redis.exceptions import RedisError
from rq import Queue, Worker
from rq.utils import now as rq_now

from transport.connection import redis_connection

logger = logging.getLogger(__name__)


def _seconds_since(moment: datetime | None) -> int | None:
    return None if moment is None else max(0, round((rq_now() - moment).total_seconds()))


def queue_overview() -> dict:
    """Per queue: queued, scheduled, started, failed, deferred; workers alive.
    Never raises on a dead Redis."""
    try:
        connection = redis_connection()
        queues = []
        for name in settings.REPORT_QUEUES:
            queue = Queue(name, connection=connection)
            queues.append(
                {
                    "name": name,
                    "queued": queue.count,
                    "scheduled": queue.scheduled_job_registry.count,
                    "started": queue.started_job_registry.count,
                    "failed": queue.failed_job_registry.count,
                    "deferred": queue.deferred_job_registry.count,
                }
            )
        workers = [
            {
                "name": worker.name,
                "state": worker.get_state(),
                "queues": ", ".join(worker.queue_names()),
                "current_job": worker.get_current_job_id() or "",
                "last_heartbeat": worker.last_heartbeat,
                "heartbeat_age": _seconds_since(worker.last_heartbeat),
                "host": f"{worker.hostname or '?'} pid {worker.pid or '?'}",
                "successful": worker.successful_job_count,
                "failed": worker.failed_job_count,
            }
            for worker in Worker.all(connection=connection)
        ]
        workers.sort(key=lambda w: w["name"])
        return {"reachable": True, "queues": queues, "workers": workers, "error": ""}
    except (RedisError, OSError) as exc:
        return {"reachable": False, "queues": [], "workers": [],
                "error": f"{type(exc).__name__}: {exc}"[:300]}
    except Exception as exc:  # odd data in Redis must not turn the dashboard into a 500
        logger.exception("reading RQ state failed")
        return {"reachable": True, "queues": [], "workers": [], "error": f"{type(exc).__name__}: {exc}"[:300]}
