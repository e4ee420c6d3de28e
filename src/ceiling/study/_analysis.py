"""Per-checkpoint figures and their aggregation over seeds.

One evaluation (a checkpoint on the held-out cards, ``k`` samples each) is reduced to
per-card counts: ``n`` valid samples, ``c`` passing, ``distinct`` = the number of distinct
*successful* action sequences (the tuple of the actions of a passing episode; infra errors
left out). From them:

- ``pass@1`` = mean over cards of ``c / n``; ``pass@k`` = mean of the unbiased estimator
  (cards with ``n >= k``); ``diversity`` = mean over cards of ``distinct``;
- over seeds, a **hierarchical bootstrap**: each resample draws seeds with replacement and
  cards with replacement (the same cards for every seed: they are the same held-out cards),
  so the interval covers both seed-to-seed and card-to-card variation. With one seed it
  reduces to the usual card bootstrap;
- a change against the base is paired per card (the base was evaluated on the same cards
  with the same sampling seeds).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..evaluate import pass_at_k
from ..rollout import Trajectory
from ..verify import Outcome

METRICS = ("pass@1", "pass@k", "diversity")


def _action_key(t: Trajectory) -> str:
    return json.dumps([x.action if x.action is not None else x.text.strip() for x in t.turns],
                      sort_keys=True)


def card_counts(trajs: Iterable[Trajectory]) -> dict[str, dict[str, Any]]:
    """``{card_id: {n, c, distinct, template}}`` (infra errors left out of n)."""
    out: dict[str, dict[str, Any]] = {}
    seqs: dict[str, set[str]] = {}
    for t in trajs:
        d = out.setdefault(t.card_id, {"n": 0, "c": 0, "distinct": 0,
                                       "template": t.template or t.card_id.split("@")[0],
                                       "infra": 0})
        if t.outcome == Outcome.INFRA_ERROR:
            d["infra"] += 1
            continue
        d["n"] += 1
        if t.passed:
            d["c"] += 1
            seqs.setdefault(t.card_id, set()).add(_action_key(t))
    for cid, s in seqs.items():
        out[cid]["distinct"] = len(s)
    return dict(sorted(out.items()))


def per_card_values(cards: dict[str, dict[str, Any]], metric: str, k: int,
                    order: Sequence[str]) -> np.ndarray:
    """One value per card of ``order`` (NaN where the card has too few samples)."""
    vals = []
    for cid in order:
        d = cards.get(cid)
        if d is None or d["n"] == 0:
            vals.append(np.nan)
        elif metric == "pass@1":
            vals.append(d["c"] / d["n"])
        elif metric == "pass@k":
            vals.append(pass_at_k(d["n"], d["c"], k) if d["n"] >= k else np.nan)
        elif metric == "diversity":
            vals.append(float(d["distinct"]))
        else:
            raise ValueError(f"unknown metric {metric!r}")
    return np.asarray(vals, dtype=float)


def hierarchical(mat: np.ndarray, *, seed: int = 0, resamples: int = 2000,
                 level: float = 0.95) -> dict[str, Any]:
    """Mean of a (seeds x cards) matrix and its bootstrap interval resampling seeds, then
    cards (shared across seeds). NaN cells are left out of each mean."""
    mat = np.atleast_2d(np.asarray(mat, dtype=float))
    if mat.size == 0 or np.all(np.isnan(mat)):
        return {"value": None, "ci": None, "seeds": int(mat.shape[0]), "cards": 0}
    s, c = mat.shape
    rng = np.random.default_rng(seed)
    si = rng.integers(0, s, size=(resamples, s))
    ci = rng.integers(0, c, size=(resamples, c))
    stats = np.empty(resamples)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN resamples: dropped below
        for b in range(resamples):
            stats[b] = np.nanmean(mat[si[b]][:, ci[b]])
    stats = stats[~np.isnan(stats)]
    a = (1 - level) / 2
    lo, hi = (np.quantile(stats, [a, 1 - a]) if stats.size else (np.nan, np.nan))
    per_seed = [float(np.nanmean(r)) if not np.all(np.isnan(r)) else None for r in mat]
    return {"value": float(np.nanmean(mat)), "ci": [float(lo), float(hi)],
            "seeds": int(s), "cards": int(np.sum(~np.all(np.isnan(mat), axis=0))),
            "per_seed": per_seed}


def matrix(evals: Sequence[dict[str, Any]], metric: str, k: int,
           order: Sequence[str]) -> np.ndarray:
    return np.stack([per_card_values(e["cards"], metric, k, order) for e in evals]) \
        if evals else np.empty((0, len(order)))


def pass_k_verdict(changes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The answer to "does GRPO lose pass@k where ES keeps it", from the top-rung paired
    changes of pass@k against the base (``changes[opt] = {"value", "ci"}``)."""
    g, e = changes.get("grpo"), changes.get("es")
    if not g or not e or g.get("ci") is None or e.get("ci") is None:
        return {"answer": "not measured", "why": "needs both grpo and es at a common rung"}

    def word(ch: dict[str, Any]) -> str:
        lo, hi = ch["ci"]
        return "loses" if hi < 0 else "gains" if lo > 0 else "keeps (no clear change)"

    gw, ew = word(g), word(e)
    if gw == "loses" and ew != "loses":
        ans = "yes"
    elif gw == "loses" and ew == "loses":
        ans = "no: both lose pass@k"
    else:
        ans = "no: GRPO does not lose pass@k here"
    fmt = lambda ch: f"{ch['value']:+.3f} [{ch['ci'][0]:+.3f}, {ch['ci'][1]:+.3f}]"
    return {"answer": ans, "grpo": gw, "es": ew,
            "why": f"pass@k change vs the base at the top rung: GRPO {fmt(g)} ({gw}), "
                   f"ES {fmt(e)} ({ew}); 95 % intervals over seeds and cards"}


__all__ = ["METRICS", "card_counts", "hierarchical", "matrix", "pass_k_verdict",
           "per_card_values"]
