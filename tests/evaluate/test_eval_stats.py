"""pass@k estimator, bootstrap intervals and McNemar: values and edges."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ceiling.evaluate import bootstrap_ci, mcnemar_exact, pass_at_k


def _naive(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@pytest.mark.parametrize("n,c,k", [(10, 3, 1), (10, 3, 5), (20, 0, 4), (20, 20, 4), (5, 1, 5),
                                   (200, 13, 50), (7, 6, 2)])
def test_pass_at_k_matches_the_binomial_formula(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(_naive(n, c, k), abs=1e-12)


def test_pass_at_1_is_the_pass_rate() -> None:
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)


def test_pass_at_k_is_stable_for_large_n() -> None:
    # C(1000, 500) overflows floats; the product form must not.
    v = pass_at_k(1000, 10, 500)
    assert 0.99 < v <= 1.0
    assert pass_at_k(1000, 0, 500) == 0.0


def test_k_greater_than_n_is_an_error_never_one() -> None:
    with pytest.raises(ValueError, match="k > n"):
        pass_at_k(3, 3, 4)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 0)


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    vals = np.array([0.0, 1.0] * 20)
    a = bootstrap_ci(vals, seed=3)
    assert a == bootstrap_ci(vals, seed=3)
    assert a is not None and a[0] < 0.5 < a[1]
    assert bootstrap_ci([1.0, 1.0, 1.0]) == (1.0, 1.0)
    assert bootstrap_ci([]) is None


def test_mcnemar_exact() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(10, 0) == pytest.approx(2 / 1024)
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(1, 5) == pytest.approx(mcnemar_exact(5, 1))
