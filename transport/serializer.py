"""RQ payloads (job data, meta, results) as JSON."""

import json


class JobSerializer:
    """Our jobs carry only integers and strings, and JSON cannot run code on load. (Which function
    a job may name is transport.registry's business: JSON alone does not stop a Redis writer from
    naming any importable function.) A payload that is not JSON, a pickle say, fails to load: RQ
    logs and fails that job, and the reaper re-enqueues its task as it does for any lost job."""

    @staticmethod
    def dumps(obj) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    @staticmethod
    def loads(data: bytes):
        return json.loads(data)
