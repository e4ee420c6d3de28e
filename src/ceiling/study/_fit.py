"""A saturating curve of held-out pass rate against the post-training budget.

Form (hyperbolic saturation, "Michaelis-Menten")::

    y(x) = y0 + (ymax - y0) * x / (x + x50)

``y0`` is the base's value (x = 0 rollouts), ``ymax`` the asymptote, ``x50`` the budget at
which half of the gain is reached. The gain per **doubling** of the budget,

    g(x) = y(2x) - y(x) = (ymax - y0) * x * x50 / ((2x + x50) (x + x50)),

peaks at ``x = x50 / sqrt(2)`` and then falls towards 0; ``stop_budget`` is the smallest
budget past the peak where it is below ``threshold`` (None when the fit has no gain, or
the gain never reaches the threshold at all, in which case every doubling is below it).

Fit: least squares over every (budget, value) point given (one per seed and rung, plus
the base); for each ``x50`` on a log grid the model is linear in ``(y0, ymax - y0)``, so
the best ``x50`` is found by grid search and the other two by a 2x2 solve. No scipy.
Limits: ``ymax`` is not constrained to [0, 1] (a noisy ladder can put it outside); such a
fit, and one whose best ``x50`` lies at an edge of the grid (a flat or straight ladder), is
reported with ``identified = False`` and no stop budget; with fewer than 3 distinct
budgets the fit is not identified and :func:`fit_saturating` returns None.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass
class SaturatingFit:
    y0: float
    ymax: float
    x50: float
    rmse: float
    n_points: int
    threshold: float
    stop_budget: float | None  # where the gain per doubling falls below threshold
    # False when the data do not place the curve: the best x50 sits at an edge of the
    # search grid (no bend inside the ladder) or the asymptote leaves [0, 1]; ``why`` says
    # which, and ``stop_budget`` is then None (an extrapolation, not a measurement)
    identified: bool = True
    why: str = ""

    def predict(self, x: float | np.ndarray) -> Any:
        x = np.asarray(x, dtype=float)
        return self.y0 + (self.ymax - self.y0) * x / (x + self.x50)

    def gain_per_doubling(self, x: float) -> float:
        return float(self.predict(2 * x) - self.predict(x))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["form"] = "y0 + (ymax - y0) * x / (x + x50)"
        return d


def stop_budget(amp: float, x50: float, threshold: float) -> float | None:
    """Smallest x >= x50/sqrt(2) where ``amp * x * x50 / ((2x + x50)(x + x50)) < threshold``
    (solving ``2 t x^2 + (3 t x50 - a x50) x + t x50^2 = 0`` for its larger root)."""
    if amp <= 0 or x50 <= 0:
        return None
    peak = x50 / math.sqrt(2)
    if amp * peak * x50 / ((2 * peak + x50) * (peak + x50)) < threshold:
        return 0.0  # no doubling anywhere gains as much as the threshold
    a, b, c = 2 * threshold, 3 * threshold * x50 - amp * x50, threshold * x50 * x50
    disc = b * b - 4 * a * c
    if disc < 0:
        return 0.0
    return float((-b + math.sqrt(disc)) / (2 * a))


def fit_saturating(xs: Sequence[float], ys: Sequence[float], *, threshold: float = 0.01,
                   ) -> SaturatingFit | None:
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(set(x.tolist())) < 3:
        return None
    pos = x[x > 0]
    lo, hi = (float(pos.min()) / 16, float(pos.max()) * 64) if pos.size else (1.0, 1e6)
    best: tuple[float, float, float, float] | None = None
    grid = np.geomspace(lo, hi, 400)
    for x50 in grid:
        f = x / (x + x50)
        a = np.stack([np.ones_like(f), f], axis=1)
        coef, *_ = np.linalg.lstsq(a, y, rcond=None)
        sse = float(((a @ coef - y) ** 2).sum())
        if best is None or sse < best[0]:
            best = (sse, float(coef[0]), float(coef[1]), float(x50))
    assert best is not None
    sse, y0, amp, x50 = best
    why = []
    if x50 <= float(grid[0]) or x50 >= float(grid[-1]):
        why.append(f"x50 at the edge of the search grid ({x50:.3g} rollouts): the ladder "
                   "shows no bend")
    if not -0.05 <= y0 + amp <= 1.05:
        why.append(f"asymptote {y0 + amp:.3g} outside [0, 1]")
    return SaturatingFit(y0=y0, ymax=y0 + amp, x50=x50, rmse=math.sqrt(sse / x.size),
                         n_points=int(x.size), threshold=threshold,
                         stop_budget=None if why else stop_budget(amp, x50, threshold),
                         identified=not why, why="; ".join(why))


__all__ = ["SaturatingFit", "fit_saturating", "stop_budget"]
