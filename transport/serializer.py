"""RQ payloads (job data, meta, results) as JSON."""

import json
import pickle

from django.conf import settings

# Pickle's PROTO opcode: every pickle RQ ever wrote (protocol 2 and later) starts with it, and no
# JSON text does.
_PICKLE_PROTO = b"\x80"


class JobSerializer:
    """Our jobs carry only integers and strings, and JSON cannot run code on load. (Which function
    a job may name is transport.registry's business: JSON alone does not stop a Redis writer from
    naming any importable function.)

    Jobs pickled by earlier releases are read only while settings.RQ_ACCEPT_PICKLED_JOBS is on;
    otherwise they fail (RQ logs it) and the reaper re-enqueues their tasks as JSON."""

    @staticmethod
    def dumps(obj) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    @staticmethod
    def loads(data: bytes):
        if data[:1] == _PICKLE_PROTO:
            if not settings.RQ_ACCEPT_PICKLED_JOBS:
                raise ValueError(
                    "refused a pickled RQ payload: set RQ_ACCEPT_PICKLED_JOBS=true to run jobs "
                    "enqueued before the switch to JSON"
                )
            return pickle.loads(data)  # noqa: S301 - only by operator opt-in, for the upgrade
        return json.loads(data)
