"""The bare-RQ side of bench/throughput.py: a job that does nothing."""


def noop(*args, **kwargs):
    return None
