"""Percentiles as PostgreSQL's percentile_cont computes them (linear interpolation between the
two nearest ranks), for the databases that have no such aggregate; and the bound within which a
percentile read from a sample agrees with the exact one."""

import math


def percentile_cont(values: list[float], fraction: float) -> float | None:
    """The `fraction` (0..1) percentile of `values`, interpolated as percentile_cont does; None when
    there are no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def sample_rank_margin(fraction: float, sample: int) -> float:
    """How far (as a fraction of the ranks) the `fraction` percentile of a uniform sample of `sample`
    values may sit from the same percentile of all of them: three standard errors of a sample
    quantile's rank, sqrt(p(1-p)/n). 0.035 for p50 and 0.015 for p95 of 2,000 values."""
    return 3 * math.sqrt(fraction * (1 - fraction) / sample)
