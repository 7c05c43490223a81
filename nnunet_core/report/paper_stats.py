"""The statistics a paper reports: spread over seeds, bootstrap intervals over cases, paired tests.

Seeded throughout (``seed``), so that the same inputs give the same numbers, byte for byte:

- ``class_mean``: upstream's ``foreground_mean`` of a cases x classes matrix: each class's mean
  over the cases that have a value (NaN: class absent from reference and prediction), then the
  plain mean over classes (NaN if a class has no value in any case, as upstream's is).
- ``bootstrap_ci``: the percentile bootstrap 95 % interval of the mean over cases (scipy's
  ``stats.bootstrap``, 10,000 resamples). The percentile method, not BCa: BCa fails on the
  ties and tiny case counts of short runs, and a paper can state the percentile method plainly.
- ``bootstrap_class_mean_ci``: the same interval for ``class_mean``, resampling whole cases
  (rows); resamples in which a class has no value at all are left out.
- ``FEW_CASES``: below this many cases an interval is flagged: the bootstrap draws only from the
  cases at hand, so with a handful of them the interval is far too narrow to trust.
- ``paired_test``: the Wilcoxon signed-rank test over cases (scipy's ``stats.wilcoxon``,
  two-sided) between the selected model and another candidate, with the median paired
  difference and which side it favours (for HD95 lower is better).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 10_000
HIGHER_IS_BETTER = {"Dice": True, "IoU": True, "NSD": True, "HD95": False}
FEW_CASES = 10


def class_mean(matrix: np.ndarray) -> float:
    """Mean over classes (columns) of the per-class means over cases (rows), NaN left out per
    class, with upstream's arithmetic (``np.nanmean`` per class, ``np.mean`` over classes), so
    that it equals a ``summary.json``'s ``foreground_mean`` to the last bit."""
    values = np.asarray(matrix, dtype=np.float64)
    if values.size == 0:
        return math.nan
    per_class = [
        float(np.nanmean(column)) if np.isfinite(column).any() else math.nan for column in values.T
    ]
    return float(np.mean(per_class))


def _stacked_class_mean(matrix: np.ndarray) -> np.ndarray:
    """``class_mean`` of every matrix in a stack (bootstrap resamples; last-bit order aside)."""
    values = np.asarray(matrix, dtype=np.float64)
    present = np.isfinite(values)
    counts = present.sum(axis=-2)
    sums = np.where(present, values, 0.0).sum(axis=-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_class = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return per_class.mean(axis=-1)


def bootstrap_class_mean_ci(
    matrix: np.ndarray, seed: int = 0, resamples: int = RESAMPLES
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``class_mean``, resampling cases (rows)."""
    values = np.asarray(matrix, dtype=np.float64)
    point = class_mean(values) if values.ndim == 2 else math.nan
    if not np.isfinite(point):
        return math.nan, math.nan
    if values.shape[0] == 1:
        return point, point
    rng = np.random.default_rng(seed)
    statistics = []
    for start in range(0, resamples, 1000):  # bounded memory: 1000 resamples at a time
        rows = rng.integers(0, values.shape[0], size=(min(1000, resamples - start), len(values)))
        statistics.append(_stacked_class_mean(values[rows]))
    finite_stats = finite(np.concatenate(statistics))
    half = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(finite_stats, [half, 100 - half])
    return float(low), float(high)


def finite(values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    return array[np.isfinite(array)]


def mean_and_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1; NaN for fewer than two values)."""
    array = finite(values)
    if array.size == 0:
        return math.nan, math.nan
    sd = float(np.std(array, ddof=1)) if array.size > 1 else math.nan
    return float(np.mean(array)), sd


def bootstrap_ci(
    values: Sequence[float], seed: int = 0, resamples: int = RESAMPLES
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean; one value or identical values: that value."""
    from scipy import stats

    array = finite(values)
    if array.size == 0:
        return math.nan, math.nan
    if array.size == 1 or np.all(array == array[0]):
        return float(array[0]), float(array[0])
    result = stats.bootstrap(
        (array,),
        np.mean,
        n_resamples=resamples,
        confidence_level=CONFIDENCE,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    interval = result.confidence_interval
    return float(interval.low), float(interval.high)


def paired_test(
    selected: Sequence[float], other: Sequence[float], metric: str = "Dice"
) -> dict[str, Any]:
    """Wilcoxon signed-rank over the cases both have a finite value for.

    ``median_difference`` is selected minus other; ``favours`` is ``selected``, ``other`` or
    ``neither`` (no difference), by the metric's direction. All differences zero: p = 1.
    """
    from scipy import stats

    a, b = np.asarray(selected, dtype=np.float64), np.asarray(other, dtype=np.float64)
    both = np.isfinite(a) & np.isfinite(b)
    differences = a[both] - b[both]
    n = int(differences.size)
    if n == 0:
        return {"n": 0, "p_value": math.nan, "median_difference": math.nan, "favours": "neither"}
    median = float(np.median(differences))
    if np.all(differences == 0):
        p_value = 1.0
    else:
        p_value = float(stats.wilcoxon(a[both], b[both], alternative="two-sided").pvalue)
    better = median > 0 if HIGHER_IS_BETTER.get(metric, True) else median < 0
    favours = "neither" if median == 0 else ("selected" if better else "other")
    return {"n": n, "p_value": p_value, "median_difference": median, "favours": favours}
