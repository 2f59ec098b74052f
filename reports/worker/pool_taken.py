"""How a pool worker takes jobs from RQ's queues for its horses: a job for each idle horse in one
round trip, handed out one by one by the loop; jobs taken ahead while every horse is busy; and
those not handed over put back at the heads of their queues (a stop, a suspension, a job taken
ahead that waited too long)."""

import logging
import time

from redis.exceptions import RedisError

from reports.worker import pool_rq

logger = logging.getLogger("reports.worker")

# How long jobs taken ahead (every horse busy) wait for a horse before they go back to their
# queues: past this, the report being waited on is long enough that a dequeue after it adds little.
TAKE_AHEAD_SECONDS = 0.02


class JobsForHorses:
    """Mixed into PoolReportWorker: `_idle`, `_inflight`, `_ended` and `_service` are the pool's."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._taken: list = []  # (job, queue) dequeued for idle horses, or ahead; not handed over yet
        self._taken_until = 0.0  # when jobs taken ahead go back to their queues
        self._may_take_ahead = False  # once per hand-over

    def _dequeue_now(self):
        """A non-blocking look at the queues, in their order: a job for each idle horse in one
        round trip, handed out one by one by the loop."""
        if self._taken:
            return self._announce(self._taken.pop(0))
        wanted = max(len(self._idle), 1)
        try:
            jobs = pool_rq.dequeue_many(self, releasing=self._ended, wanted=wanted)
            while jobs and all(job is pool_rq.GONE for job in jobs):
                jobs = pool_rq.dequeue_many(self, wanted=wanted)
        except RedisError as exc:
            logger.error("dequeue failed: %s", exc)
            self._service(1.0)
            return None
        if not jobs:
            return None
        first, *self._taken = [job for job in jobs if job is not pool_rq.GONE]
        return self._announce(first)

    def _take_ahead(self) -> None:
        """Every horse busy: the next jobs, one for each horse, are dequeued now (once the ones taken
        before are handed out), so that a horse that finishes gets its next job at once (the
        dequeue, a Redis round trip and the jobs' parsing, was about 0.8 ms of a report's path).
        They wait TAKE_AHEAD_SECONDS at most, then go back to the heads of their queues for
        whichever worker is free; a job whose kind is at its cap is not taken ahead. Should this
        worker die holding them, the reaper enqueues their tasks again (REPORT_REENQUEUE_AFTER),
        as for any job popped by a worker that died."""
        if self._taken or not self._may_take_ahead or self._stop_requested:
            return
        self._may_take_ahead = False
        try:
            jobs = pool_rq.dequeue_many(self, full_goes_back=True, wanted=len(self._inflight))
        except RedisError as exc:
            logger.error("dequeue failed: %s", exc)
            return
        if jobs is pool_rq.FULL:
            return
        self._taken = [job for job in jobs if job is not pool_rq.GONE]
        self._taken_until = time.monotonic() + TAKE_AHEAD_SECONDS

    def _put_back_if_waited_too_long(self) -> None:
        if self._taken and not self._idle and time.monotonic() >= self._taken_until:
            self._put_back_taken()

    def _announce(self, result):
        job, queue = result
        self.reorder_queues(reference_queue=queue)
        job.redis_server_version = self.get_redis_server_version()
        logger.info("Worker %s: %s: %s", self.name, queue.name, job.id)
        return result

    def _put_back_taken(self) -> None:
        taken, self._taken = self._taken, []
        try:
            pool_rq.put_back(self, taken)
        except RedisError as exc:  # their tasks stay pending in the database: the reaper enqueues them again
            logger.error("could not put back job(s) %s: %s", ", ".join(job.id for job, _ in taken), exc)
