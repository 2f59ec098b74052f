"""transport.serializer.JobSerializer on its own: JSON both ways, never a pickle."""

import pickle

import pytest

from transport.serializer import JobSerializer


def test_job_data_round_trips_as_json():
    data = ("reports.worker.report_job.run_report_task", None, (12, 3), {})

    raw = JobSerializer.dumps(data)

    assert raw == b'["reports.worker.report_job.run_report_task",null,[12,3],{}]'
    assert JobSerializer.loads(raw) == ["reports.worker.report_job.run_report_task", None, [12, 3], {}]


def test_a_pickle_is_refused_unread():
    class Exploding:
        def __reduce__(self):
            return (pytest.fail, ("a pickle in Redis was unpickled",))

    with pytest.raises(ValueError):
        JobSerializer.loads(pickle.dumps(Exploding()))
