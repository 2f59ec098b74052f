"""A worker that Redis forgot: a Redis that restarted empty (or was flushed) drops the
registrations of the workers that live on, and `rq info`, the console and the no-live-worker
alert would call them dead while they keep working."""

from rq import worker_registration


def queue_registration_check(worker, pipeline) -> None:
    """Adds to the heartbeat's pipeline the question whether Redis still lists the worker."""
    pipeline.sismember(worker_registration.REDIS_WORKER_KEYS, worker.key)


def register_again(worker) -> None:
    """The whole registration written again (RQ's register_birth refuses: the heartbeat that
    noticed has already made the worker's key exist)."""
    worker.log.warning(
        "Worker %s: Redis no longer lists this worker (restarted or flushed); registering it again", worker.name
    )
    with worker.connection.pipeline() as pipeline:
        pipeline.delete(worker.key)
        pipeline.hset(worker.key, mapping=worker.serialize())
        worker_registration.register(worker, pipeline)
        pipeline.expire(worker.key, worker.worker_ttl + 60)
        pipeline.execute()
