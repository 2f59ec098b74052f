"""The bare-RQ side of bench/pipeline_overhead.py: a job that does nothing."""


def noop(*args, **kwargs):
    return None
