"""The statistics of a methods comparison: difference to the baseline, Holm's correction, ranks.

- ``difference_to_baseline``: per case (seed-averaged), method minus baseline over the cases
  both have; the mean difference, its percentile bootstrap 95 % interval over cases
  (``paper_stats.bootstrap_ci``, seeded) and the two-sided paired Wilcoxon signed-rank test.
- ``holm``: Holm's step-down adjusted p-values, over every comparison of a table (each method
  on each dataset); a difference is called significant only where its adjusted p is below
  ``ALPHA``, never because a bootstrap interval leaves out zero.
- ``mean_ranks``: as the nnU-Net Revisited tables: on each dataset the methods are ranked by
  their mean Dice (1 the best, ties share the mean of their ranks), then the ranks are averaged
  over the datasets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from nnunet_core.report.paper_stats import bootstrap_ci, paired_test

ALPHA = 0.05  # Holm-adjusted p below this: significant


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values in the input order; NaN stays NaN and is not counted."""
    values = np.asarray(p_values, dtype=np.float64)
    tested = np.flatnonzero(np.isfinite(values))
    adjusted = np.full(values.shape, math.nan)
    m = tested.size
    running = 0.0
    for step, index in enumerate(tested[np.argsort(values[tested], kind="stable")]):
        running = max(running, min(1.0, (m - step) * float(values[index])))
        adjusted[index] = running
    return [float(v) for v in adjusted]


def difference_to_baseline(
    method: pd.Series, baseline: pd.Series, seed: int = 0
) -> dict[str, float | int]:
    """Method minus baseline over the cases (index) both have: n, mean, bootstrap interval, p."""
    cases = method.index.intersection(baseline.index)
    mine = method[cases].to_numpy(dtype=np.float64)
    theirs = baseline[cases].to_numpy(dtype=np.float64)
    both = np.isfinite(mine) & np.isfinite(theirs)
    differences = mine[both] - theirs[both]
    if differences.size == 0:
        nan = math.nan
        return {"n": 0, "mean": nan, "ci_low": nan, "ci_high": nan, "p_value": nan}
    low, high = bootstrap_ci(differences, seed=seed)
    test = paired_test(mine[both], theirs[both])
    return {
        "n": int(differences.size),
        "mean": float(np.mean(differences)),
        "ci_low": low,
        "ci_high": high,
        "p_value": float(test["p_value"]),
    }


def mean_ranks(means: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """``{dataset: {method: mean Dice}}`` -> ``{method: mean rank over datasets}`` (1 = best)."""
    ranks: dict[str, list[float]] = {}
    for by_method in means.values():
        scores = pd.Series(by_method, dtype=np.float64)
        ranked = scores.rank(ascending=False, method="average", na_option="bottom")
        for method, rank in ranked.items():
            ranks.setdefault(str(method), []).append(float(rank))
    return {method: float(np.mean(values)) for method, values in ranks.items()}
