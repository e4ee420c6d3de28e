"""Compare two stored runs with paired statistics, and gate a candidate against a baseline.

Pairing is by card: only the cards both runs hold enter a comparison. For every metric the
delta is ``candidate - baseline`` over those shared cards, and its interval is a paired
percentile bootstrap (resample shared cards, recompute the mean per-card difference). An
exact McNemar test runs on card-level pass/fail, where a card *passes* when at least half
of its valid samples pass (with k = 1 this is the episode's outcome).

The gate (``docs/evaluation.md``): a metric *regresses* when it got worse by more than
``max_drop`` (absolute, in rate units) AND the upper end of the paired 95% interval of the
change is below zero (the interval excludes "no drop"). Both must hold, so a large but noisy
drop and a small but certain one both pass the gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import ConfigError
from ._metrics import CardStats, card_stats_from_rows, gap_stat, metric_arrays
from ._stats import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    bootstrap_ci,
    bootstrap_stat_ci,
    masked_means,
    mcnemar_exact,
)
from ._store import RunRecord, Store, differing_parts

# metrics where a smaller value is better (a "drop" is an increase)
LOWER_IS_BETTER = ("boundary.wrong_giveup", "heldout_gap", "steps", "tokens", "seconds")
NOT_GATEABLE = ("steps", "tokens", "seconds")


def _metric_names(a: list[CardStats], b: list[CardStats], k: int) -> list[str]:
    names = ["pass@1"] + ([f"pass@{k}"] if k > 1 else [])
    for attr, prefix in (("horizon", "by_horizon"), ("type", "by_type")):
        keys = sorted({getattr(c, attr) for c in a} & {getattr(c, attr) for c in b})
        names += [f"{prefix}.{x}" for x in keys]
    return names + ["recovery", "boundary.correct_giveup", "boundary.wrong_giveup",
                    "heldout_gap", "steps", "tokens", "seconds"]


def _paired(a: list[CardStats], b: list[CardStats], name: str, *, seed: int, resamples: int,
            level: float) -> dict[str, Any]:
    kw: dict[str, Any] = {"seed": seed, "resamples": resamples, "level": level}
    empty = {"a": None, "b": None, "delta": None, "ci": None, "n_cards": 0}
    if name == "heldout_gap":
        tra, hoa, ra = gap_stat(a)
        trb, hob, rb = gap_stat(b)
        tr, ho = tra & trb, hoa & hob
        if not (tr.any() and ho.any()):
            return empty
        va = float(ra[tr].mean() - ra[ho].mean())
        vb = float(rb[tr].mean() - rb[ho].mean())

        def stat(idx: np.ndarray) -> np.ndarray:
            ga = masked_means(ra, tr, idx) - masked_means(ra, ho, idx)
            gb = masked_means(rb, tr, idx) - masked_means(rb, ho, idx)
            return gb - ga

        ci = bootstrap_stat_ci(len(a), stat, **kw)
        return {"a": va, "b": vb, "delta": vb - va, "ci": list(ci) if ci else None,
                "n_cards": int((tr | ho).sum())}
    try:
        ma, va_ = metric_arrays(a, name)
        mb, vb_ = metric_arrays(b, name)
    except ValueError:
        return empty
    m = ma & mb
    if not m.any():
        return empty
    diff = vb_[m] - va_[m]
    ci = bootstrap_ci(diff, **kw)
    return {"a": float(va_[m].mean()), "b": float(vb_[m].mean()), "delta": float(diff.mean()),
            "ci": list(ci) if ci else None, "n_cards": int(m.sum())}


def compare_records(ra: RunRecord, rb: RunRecord, rows_a: list[dict[str, Any]],
                    rows_b: list[dict[str, Any]], *, force: bool = False, seed: int = 0,
                    resamples: int = DEFAULT_RESAMPLES,
                    level: float = DEFAULT_LEVEL) -> dict[str, Any]:
    """Per-metric deltas (b - a) over shared cards, McNemar, and the cards that flipped.
    Raises ConfigError when the keys differ and ``force`` is false, or no card is shared."""
    diff = differing_parts(ra.key_parts, rb.key_parts)
    if ra.key != rb.key and not force:
        detail = "; ".join(f"{p}: {_short(ra.key_parts.get(p))} vs {_short(rb.key_parts.get(p))}"
                           for p in diff) or "key"
        raise ConfigError(f"runs {ra.label!r} and {rb.label!r} are not comparable: their keys "
                          f"differ in {', '.join(diff) or 'the key'} ({detail})",
                          fix="compare runs of the same suite, harness, sampling and version, "
                              "or pass --force to compare anyway")
    ca = {c.card_id: c for c in card_stats_from_rows(rows_a)}
    cb = {c.card_id: c for c in card_stats_from_rows(rows_b)}
    shared = sorted(set(ca) & set(cb))
    if not shared:
        raise ConfigError(f"runs {ra.label!r} and {rb.label!r} share no card",
                          fix="compare two runs of the same suite")
    a, b = [ca[i] for i in shared], [cb[i] for i in shared]
    k = min(max(c.n_total for c in a), max(c.n_total for c in b))
    metrics = {name: _paired(a, b, name, seed=seed, resamples=resamples, level=level)
               for name in _metric_names(a, b, k)}
    # card-level pass/fail (majority of valid samples) for McNemar and flips
    regressed, improved = [], []
    for x, y in zip(a, b, strict=True):
        if x.n == 0 or y.n == 0:
            continue
        pa, pb = x.c * 2 >= x.n, y.c * 2 >= y.n
        entry = {"card": x.card_id, "a": x.rate, "b": y.rate}
        if pa and not pb:
            regressed.append(entry)
        elif pb and not pa:
            improved.append(entry)
    return {
        "a": {"id": ra.id, "name": ra.name, "policy": ra.policy, "key": ra.key},
        "b": {"id": rb.id, "name": rb.name, "policy": rb.policy, "key": rb.key},
        "key_match": ra.key == rb.key, "differing_parts": diff, "forced": bool(force and diff),
        "infra_errors": {"a": sum(c.n_total - c.n for c in a),
                         "b": sum(c.n_total - c.n for c in b)},
        "shared_cards": len(shared), "only_a": len(set(ca) - set(cb)),
        "only_b": len(set(cb) - set(ca)), "k": k,
        "metrics": metrics,
        "mcnemar": {"pass_to_fail": len(regressed), "fail_to_pass": len(improved),
                    "p": mcnemar_exact(len(regressed), len(improved)),
                    "basis": "card passes when at least half of its valid samples pass"},
        "flipped": {"regressed": regressed, "improved": improved},
        "bootstrap": {"resamples": resamples, "seed": seed, "level": level,
                      "method": "paired percentile bootstrap over shared cards"},
    }


def _short(v: Any) -> str:
    s = v if isinstance(v, str) else str(v)
    return s if len(s) <= 40 else s[:37] + "..."


def compare(store: Store, ref_a: str, ref_b: str, **kw: Any) -> dict[str, Any]:
    """:func:`compare_records` for two runs named by name or id."""
    ra, rb = store.get(ref_a), store.get(ref_b)
    return compare_records(ra, rb, store.episodes(ra.id), store.episodes(rb.id), **kw)


@dataclass
class GateResult:
    passed: bool
    reasons: list[str]
    checks: list[dict[str, Any]]
    comparison: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "reasons": self.reasons, "checks": self.checks,
                "comparison": self.comparison}


def gate(store: Store, baseline: str, candidate: str, *, max_drop: float = 0.02,
         metrics: tuple[str, ...] = ("pass@1",), force: bool = False, seed: int = 0,
         resamples: int = DEFAULT_RESAMPLES, level: float = DEFAULT_LEVEL) -> GateResult:
    """Check a candidate against a baseline (see the module docstring for the rule).
    Raises ConfigError for a metric that cannot be gated or has no shared card."""
    if not 0 <= max_drop <= 1:
        raise ConfigError(f"--max-drop {max_drop} is not a rate change", where="--max-drop",
                          fix="use a number in [0, 1], e.g. 0.02")
    cmp = compare(store, baseline, candidate, force=force, seed=seed, resamples=resamples,
                  level=level)
    checks, reasons = [], []
    for name in metrics:
        name = f"pass@{cmp['k']}" if name == "pass@k" else name
        if name in NOT_GATEABLE:
            raise ConfigError(f"metric {name!r} is a cost, not a rate; it cannot be gated",
                              where="--metric", fix="gate on pass@1, pass@k, recovery, ...")
        m = cmp["metrics"].get(name)
        if m is None and name.startswith("pass@"):
            raise ConfigError(f"{name} is not available: the runs share k={cmp['k']}",
                              where="--metric", fix=f"use pass@1 or pass@{cmp['k']}")
        if m is None or m["delta"] is None:
            raise ConfigError(f"metric {name!r} has no shared card to compare",
                              where="--metric", fix=f"use one of {sorted(cmp['metrics'])}")
        sign = -1.0 if name in LOWER_IS_BETTER else 1.0
        drop = -sign * m["delta"]  # positive = worse
        lo, hi = m["ci"]
        # interval of the *improvement* (sign * delta); regression when it lies below 0
        upper_improvement = sign * (hi if sign > 0 else lo)
        regressed = drop > max_drop and upper_improvement < 0
        check = {"metric": name, "baseline": m["a"], "candidate": m["b"], "drop": drop,
                 "ci_delta": m["ci"], "max_drop": max_drop, "regressed": regressed}
        checks.append(check)
        ci_txt = f"[{lo:+.3f}, {hi:+.3f}]"
        if regressed:
            reasons.append(f"{name} regressed: {m['a']:.3f} -> {m['b']:.3f} (drop {drop:.3f} > "
                           f"{max_drop}; {int(level * 100)}% CI of the change {ci_txt} "
                           f"excludes 0; {m['n_cards']} shared cards)")
        elif drop > max_drop:
            reasons.append(f"{name} dropped {drop:.3f} but the CI of the change {ci_txt} "
                           f"includes 0: not significant")
        else:
            reasons.append(f"{name}: {m['a']:.3f} -> {m['b']:.3f} (drop {drop:+.3f} within "
                           f"{max_drop})")
    ie = cmp["infra_errors"]
    if ie["a"] or ie["b"]:
        reasons.append(f"note: infra errors left out of the comparison: {ie['a']} episodes in "
                       f"the baseline, {ie['b']} in the candidate")
    return GateResult(passed=not any(c["regressed"] for c in checks), reasons=reasons,
                      checks=checks, comparison=cmp)


__all__ = ["LOWER_IS_BETTER", "GateResult", "compare", "compare_records", "gate"]
