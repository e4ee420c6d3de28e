"""Metrics over trajectories: pass@k, completion by horizon/type, recovery, boundary
awareness, held-out gap, cost per episode, each with a bootstrap confidence interval.

Conventions (docs/evaluation.md says the same):

- An episode *passes* when its outcome is ``solved`` or ``abstained_correct``.
- ``infra_error`` episodes never count against the model: they are counted in
  ``outcomes`` and otherwise left out (a card's ``n`` is its number of valid samples). A card
  with no valid sample is left out of every rate.
- Every rate is a mean over *cards* of a per-card value (the card's pass rate, or its pass@k
  estimate), so a card weighs the same whatever its k. Its interval resamples cards.
- ``recovery``: pass rate on cards with injected faults. ``boundary.correct_giveup``: share
  of ``abstained_correct`` on infeasible cards; ``boundary.wrong_giveup``: share of
  ``abstained_wrong`` on their feasible twins (the ``train`` variant of the same template,
  seed and difficulty), or on
  every feasible card when the run holds no twin (``wrong_giveup_basis`` says which).
- ``heldout_gap`` = pass rate on training-range cards (split train, feasible, no faults)
  minus pass rate on held-out cards; positive means the policy does worse off-distribution.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..rollout import Trajectory
from ..verify import Outcome
from ._stats import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    bootstrap_ci,
    pass_at_k,
)

_TWIN_RE = re.compile(r"^(?P<base>.+)@s(?P<seed>\d+)-d(?P<d>\d+)-(?P<variant>[a-z_]+)$")
OUTCOMES: tuple[str, ...] = tuple(o.value for o in Outcome)


@dataclass
class CardStats:
    """Everything the metrics need from the episodes of one card."""

    card_id: str
    type: str
    horizon: str
    split: str
    feasible: bool
    faults: bool
    template: str
    n_total: int = 0  # episodes, infra errors included
    n: int = 0  # valid episodes (infra errors left out)
    c: int = 0  # passing episodes
    outcomes: Counter[str] = field(default_factory=Counter)
    steps: list[float] = field(default_factory=list)
    tokens: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.c / self.n if self.n else float("nan")

    @property
    def twin_key(self) -> tuple[str, str, str] | None:
        """(template, seed, difficulty) for generated card ids, else None."""
        m = _TWIN_RE.match(self.card_id)
        return (m["base"], m["seed"], m["d"]) if m else None

    @property
    def variant(self) -> str | None:
        m = _TWIN_RE.match(self.card_id)
        return m["variant"] if m else None


def _add(cards: dict[str, CardStats], *, card_id: str, type: str, horizon: str, split: str,
         feasible: bool, faults: bool, template: str | None, outcome: str, steps: float,
         tokens: float, seconds: float) -> None:
    cs = cards.get(card_id)
    if cs is None:
        cs = cards[card_id] = CardStats(
            card_id=card_id, type=type, horizon=horizon, split=split, feasible=bool(feasible),
            faults=bool(faults), template=template or card_id.split("@", 1)[0])
    cs.n_total += 1
    outcome = outcome if outcome in OUTCOMES else Outcome.INFRA_ERROR.value
    cs.outcomes[outcome] += 1
    if outcome == Outcome.INFRA_ERROR.value:
        return
    cs.n += 1
    cs.c += int(Outcome(outcome).passed)
    cs.steps.append(float(steps))
    cs.tokens.append(float(tokens))
    cs.seconds.append(float(seconds))


def card_stats(trajectories: Iterable[Trajectory]) -> list[CardStats]:
    """Group episodes by card (sorted by card id). An unknown outcome counts as infra_error."""
    cards: dict[str, CardStats] = {}
    for t in trajectories:
        _add(cards, card_id=t.card_id, type=t.type, horizon=t.horizon, split=t.split,
             feasible=t.feasible, faults=t.faults, template=t.template, outcome=t.outcome,
             steps=len(t.turns), tokens=sum(t.tokens.values()) if t.tokens else 0,
             seconds=t.timings.get("total_s", 0.0))
    return [cards[k] for k in sorted(cards)]


def card_stats_from_rows(rows: Iterable[dict[str, Any]]) -> list[CardStats]:
    """The same from the store's episode rows (no trajectory file needed)."""
    cards: dict[str, CardStats] = {}
    for r in rows:
        _add(cards, card_id=r["card_id"], type=r["type"], horizon=r["horizon"],
             split=r["split"], feasible=r["feasible"], faults=r["faults"], template=None,
             outcome=r["outcome"], steps=r["steps"], tokens=r["tokens"], seconds=r["seconds"])
    return [cards[k] for k in sorted(cards)]


# -- per-card metric arrays ---------------------------------------------------------------

def _twin_feasible_mask(cards: list[CardStats]) -> tuple[np.ndarray, str]:
    infeasible = {c.twin_key for c in cards if not c.feasible and c.twin_key}
    twins = np.array([c.feasible and c.variant == "train" and c.twin_key in infeasible
                      for c in cards], dtype=bool)
    if twins.any():
        return twins, "twins"
    return np.array([c.feasible for c in cards], dtype=bool), "all_feasible"


def metric_arrays(cards: list[CardStats], name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(mask, values)`` over ``cards`` for a card-mean metric: the metric is the mean of
    ``values`` over the cards in ``mask``. Names: ``pass@K``, ``by_horizon.H``, ``by_type.T``,
    ``by_template.T``, ``split.train|heldout``, ``train_range``, ``recovery``,
    ``boundary.correct_giveup``, ``boundary.wrong_giveup``, ``steps``, ``tokens``,
    ``seconds``. Raises ValueError for an unknown name or ``pass@K`` with K < 1."""
    valid = np.array([c.n > 0 for c in cards], dtype=bool)
    rate = np.array([c.rate if c.n else 0.0 for c in cards], dtype=float)

    def sel(pred: Any) -> np.ndarray:
        return valid & np.array([bool(pred(c)) for c in cards], dtype=bool)

    if name.startswith("pass@"):
        k = int(name[5:])
        if k < 1:
            raise ValueError(f"pass@k needs k >= 1, got {name}")
        mask = np.array([c.n >= k for c in cards], dtype=bool)
        vals = np.array([pass_at_k(c.n, c.c, k) if c.n >= k else 0.0 for c in cards])
        return mask, vals
    group, _, key = name.partition(".")
    if group == "by_horizon":
        return sel(lambda c: c.horizon == key), rate
    if group == "by_type":
        return sel(lambda c: c.type == key), rate
    if group == "by_template":
        return sel(lambda c: c.template == key), rate
    if group == "split":
        return sel(lambda c: c.split == key), rate
    if name == "train_range":
        return sel(lambda c: c.split == "train" and c.feasible and not c.faults), rate
    if name == "recovery":
        return sel(lambda c: c.faults), rate
    if name == "boundary.correct_giveup":
        vals = np.array([c.outcomes[Outcome.ABSTAINED_CORRECT] / c.n if c.n else 0.0 for c in cards])
        return sel(lambda c: not c.feasible), vals
    if name == "boundary.wrong_giveup":
        vals = np.array([c.outcomes[Outcome.ABSTAINED_WRONG] / c.n if c.n else 0.0 for c in cards])
        twins, _ = _twin_feasible_mask(cards)
        return valid & twins, vals
    if name in ("steps", "tokens", "seconds"):
        vals = np.array([float(np.mean(getattr(c, name))) if c.n else 0.0 for c in cards])
        return valid, vals
    raise ValueError(f"unknown metric {name!r}")


def _rate(cards: list[CardStats], name: str, *, seed: int, resamples: int,
          level: float) -> dict[str, Any]:
    mask, vals = metric_arrays(cards, name)
    v = vals[mask]
    n_eps = sum(c.n for c, m in zip(cards, mask, strict=True) if m)
    if v.size == 0:
        return {"value": None, "ci": None, "n_cards": 0, "n_episodes": 0}
    ci = bootstrap_ci(v, seed=seed, resamples=resamples, level=level)
    return {"value": float(v.mean()), "ci": list(ci) if ci else None, "n_cards": int(v.size),
            "n_episodes": int(n_eps)}


def _gap(cards: list[CardStats], *, seed: int, resamples: int, level: float) -> dict[str, Any]:
    tr_mask, rate = metric_arrays(cards, "train_range")
    ho_mask, _ = metric_arrays(cards, "split.heldout")
    out: dict[str, Any] = {"train": None, "heldout": None, "value": None, "ci": None,
                           "n_train_cards": int(tr_mask.sum()),
                           "n_heldout_cards": int(ho_mask.sum())}
    if tr_mask.any():
        out["train"] = float(rate[tr_mask].mean())
    if ho_mask.any():
        out["heldout"] = float(rate[ho_mask].mean())
    if not (tr_mask.any() and ho_mask.any()):
        return out
    out["value"] = out["train"] - out["heldout"]
    # Stratified bootstrap: resample cards within each group independently.
    tr, ho = rate[tr_mask], rate[ho_mask]
    rng = np.random.default_rng(seed)
    d = (tr[rng.integers(0, tr.size, (resamples, tr.size))].mean(axis=1)
         - ho[rng.integers(0, ho.size, (resamples, ho.size))].mean(axis=1))
    a = (1 - level) / 2
    out["ci"] = [float(x) for x in np.quantile(d, [a, 1 - a])]
    return out


def gap_stat(cards: list[CardStats]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(train_mask, heldout_mask, rate)`` for the held-out gap (used by compare)."""
    tr_mask, rate = metric_arrays(cards, "train_range")
    ho_mask, _ = metric_arrays(cards, "split.heldout")
    return tr_mask, ho_mask, rate


def summarize(trajectories: Iterable[Trajectory], *, k: int | None = None,
              seed: int = 0, resamples: int = DEFAULT_RESAMPLES,
              level: float = DEFAULT_LEVEL) -> dict[str, Any]:
    """The summary of a run as a JSON-ready dict.

    ``k`` (default: the most samples any card has) sets ``pass@k``; ``pass_curve`` holds
    pass@j for j = 1..k. Raises ValueError when ``k`` exceeds the samples drawn per card
    (pass@k with k > n is undefined, never 1.0) or there are no trajectories. Cards with
    fewer than k valid samples (infra errors) are left out of pass@k and counted in its
    ``n_cards``.
    """
    trajs = list(trajectories)
    out = summarize_cards(card_stats(trajs), k=k, seed=seed, resamples=resamples, level=level)
    out["infra_error_messages"] = infra_messages(trajs)
    return out


def infra_messages(trajectories: Iterable[Trajectory], top: int = 3) -> list[dict[str, Any]]:
    """The most frequent infra-error messages (first 240 characters), for diagnosis."""
    msgs = Counter[str]()
    for t in trajectories:
        if t.outcome == Outcome.INFRA_ERROR.value:
            ev = (t.verdict or {}).get("evidence") or []
            msgs[(t.error or (str(ev[0]) if ev else "") or "(no message)")[:240]] += 1
    return [{"count": n, "message": m} for m, n in msgs.most_common(top)]


def summarize_cards(cards: list[CardStats], *, k: int | None = None, seed: int = 0,
                    resamples: int = DEFAULT_RESAMPLES,
                    level: float = DEFAULT_LEVEL) -> dict[str, Any]:
    """:func:`summarize` over already grouped cards."""
    if not cards:
        raise ValueError("no trajectories to summarize")
    drawn = max(c.n_total for c in cards)
    k = drawn if k is None else k
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if k > drawn:
        raise ValueError(f"pass@{k} needs at least {k} samples per card but the run drew "
                         f"{drawn}; rerun with -k {k} or ask for a smaller k")
    kw: dict[str, Any] = {"seed": seed, "resamples": resamples, "level": level}
    outcomes = Counter[str]()
    for c in cards:
        outcomes.update(c.outcomes)
    episodes = sum(c.n_total for c in cards)
    _, basis = _twin_feasible_mask(cards)

    def groups(prefix: str, attr: str) -> dict[str, Any]:
        keys = sorted({getattr(c, attr) for c in cards})
        return {key: _rate(cards, f"{prefix}.{key}", **kw) for key in keys}

    return {
        "cards": len(cards),
        "episodes": episodes,
        "k": k,
        "samples_per_card": drawn,
        "pass@1": _rate(cards, "pass@1", **kw),
        "pass@k": _rate(cards, f"pass@{k}", **kw),
        "pass_curve": {str(j): _rate(cards, f"pass@{j}", **kw) for j in range(1, k + 1)},
        "outcomes": {o: int(outcomes.get(o, 0)) for o in OUTCOMES},
        "outcome_shares": {o: outcomes.get(o, 0) / episodes for o in OUTCOMES},
        "infra_errors": int(outcomes.get(Outcome.INFRA_ERROR, 0)),
        "by_horizon": groups("by_horizon", "horizon"),
        "by_type": groups("by_type", "type"),
        "by_template": groups("by_template", "template"),
        "recovery": _rate(cards, "recovery", **kw),
        "boundary": {
            "correct_giveup": _rate(cards, "boundary.correct_giveup", **kw),
            "wrong_giveup": _rate(cards, "boundary.wrong_giveup", **kw),
            "wrong_giveup_basis": basis,
        },
        "heldout_gap": _gap(cards, **kw),
        "per_episode": {m: _rate(cards, m, **kw) for m in ("steps", "tokens", "seconds")},
        "bootstrap": {"resamples": resamples, "seed": seed, "level": level,
                      "method": "percentile bootstrap, resampling cards with replacement"},
    }


__all__ = [
    "OUTCOMES",
    "CardStats",
    "card_stats",
    "card_stats_from_rows",
    "gap_stat",
    "metric_arrays",
    "summarize",
    "summarize_cards",
]
