"""The RQ transport: the only package that talks to RQ. It knows queues, job ids, payloads and
which job functions a worker may run; it knows nothing of report tasks or dead letters (every
domain enqueues through it, naming its own job functions). Redis is transport, never the truth."""
