"""Statistics the evaluator rests on: pass@k, bootstrap intervals, McNemar.

- ``pass_at_k`` is the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language
  Models Trained on Code", arXiv 2107.03374, Fig. 3), in its numerically stable product
  form. ``k > n`` is an error, never a silent 1.0 (see openai/human-eval issue #35).
- Confidence intervals are percentile bootstraps that resample *cards* (the unit of
  independence: the k samples of one card are correlated), seeded so a report is
  reproducible. Paired intervals resample the cards two runs share.
- ``mcnemar_exact`` is the exact (binomial) McNemar test on discordant pairs.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

DEFAULT_RESAMPLES = 1000
DEFAULT_LEVEL = 0.95


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(at least one of k samples passes) from n samples, c passing:
    ``1 - C(n-c, k) / C(n, k)``, computed as ``1 - prod_{i=n-c+1..n} (1 - k/i)``.

    Raises ValueError when ``k > n`` (the estimator is undefined), ``k < 1`` or ``c`` is out
    of ``[0, n]``.
    """
    if k < 1:
        raise ValueError(f"pass@k needs k >= 1, got k={k}")
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n, got c={c}, n={n}")
    if k > n:
        raise ValueError(f"pass@{k} is undefined with only n={n} samples (k > n); draw at "
                         f"least {k} samples per card")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def _resample_index(m: int, seed: int, resamples: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, m, size=(resamples, m))


def _percentile(stats: np.ndarray, level: float) -> tuple[float, float]:
    stats = stats[~np.isnan(stats)]
    if stats.size == 0:
        return (math.nan, math.nan)
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(stats, [a, 1.0 - a])
    return (float(lo), float(hi))


def bootstrap_ci(values: np.ndarray | list[float], *, seed: int = 0,
                 resamples: int = DEFAULT_RESAMPLES, level: float = DEFAULT_LEVEL,
                 ) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of per-card ``values`` (cards resampled
    with replacement). None when there are no values."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return None
    idx = _resample_index(v.size, seed, resamples)
    return _percentile(v[idx].mean(axis=1), level)


def bootstrap_stat_ci(m: int, stat: Callable[[np.ndarray], np.ndarray], *, seed: int = 0,
                      resamples: int = DEFAULT_RESAMPLES, level: float = DEFAULT_LEVEL,
                      ) -> tuple[float, float] | None:
    """Percentile interval of any statistic of ``m`` cards. ``stat`` maps an index matrix of
    shape (resamples, m) to one value per resample (NaN where undefined, e.g. an empty
    group in a resample; those resamples are dropped)."""
    if m == 0:
        return None
    idx = _resample_index(m, seed, resamples)
    with np.errstate(invalid="ignore", divide="ignore"):
        return _percentile(np.asarray(stat(idx), dtype=float), level)


def masked_means(values: np.ndarray, mask: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Mean of ``values`` over the cards in ``mask``, per resample row of ``idx`` (NaN when a
    resample holds no card of the mask)."""
    w = mask[idx].astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((values[idx] * w).sum(axis=1) / w.sum(axis=1))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` pairs that went pass->fail and ``c`` that
    went fail->pass (binomial test of min(b, c) against Binomial(b + c, 1/2)). 1.0 when
    there are no discordant pairs."""
    n = b + c
    if n == 0:
        return 1.0
    lo = min(b, c)
    tail = sum(math.comb(n, i) for i in range(lo + 1)) / 2.0**n
    return float(min(1.0, 2.0 * tail))


__all__ = ["DEFAULT_LEVEL", "DEFAULT_RESAMPLES", "bootstrap_ci", "bootstrap_stat_ci",
           "masked_means", "mcnemar_exact", "pass_at_k"]
