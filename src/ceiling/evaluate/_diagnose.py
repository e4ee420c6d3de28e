"""``ceiling diagnose``: post-train or change the base? One verdict per family and horizon.

The decision table (the seeds' reading of pass@k against pass@1):

=================  ==========================================================  ==========
verdict            rule (on the row's feasible, fault-free cards)              reading
=================  ==========================================================  ==========
saturated          pass@1 >= ``saturated`` (0.9) and its CI low >= ``sat_low``   nothing to
                   (0.8)                                                       gain here
post-train         gap = pass@k - pass@1 >= ``gap`` (0.1) and the gap's CI low  capable but
                   > 0                                                         unactivated
change the base    pass@k CI high < ``low`` (0.5) and gap < ``gap``             knowledge
                                                                               gap
not measurable     fewer than ``min_cards`` (3) cards with k valid samples, or  draw more
                   none of the above (the intervals straddle the rules)        cards / k
=================  ==========================================================  ==========

Rules are checked in that order; the row carries the numbers and intervals behind its
verdict and a one-line ``why``. Beside them, for information (they do not change the
verdict): ``recovery`` = pass rate on the row's fault-variant cards and boundary awareness
= ``correct_giveup`` on its infeasible cards and ``wrong_giveup`` on their feasible twins
(the row's train-variant cards of the same template and seed), each with a card bootstrap
interval, or None when the row has no such card.

Rows group cards by ``family`` (the template id's prefix) and ``horizon``. Intervals are
percentile bootstraps over cards (``_stats.bootstrap_ci``); the gap's is paired per card.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from html import escape
from typing import Any

import numpy as np

from ._metrics import CardStats, card_stats_from_rows, metric_arrays
from ._stats import DEFAULT_RESAMPLES, bootstrap_ci, pass_at_k

VERDICTS = ("post-train", "change the base", "saturated", "not measurable")


@dataclass(frozen=True)
class Thresholds:
    saturated: float = 0.9
    sat_low: float = 0.8
    gap: float = 0.1
    low: float = 0.5
    min_cards: int = 3


def _fig(vals: np.ndarray, seed: int, resamples: int) -> dict[str, Any]:
    if vals.size == 0:
        return {"value": None, "ci": None, "n_cards": 0}
    ci = bootstrap_ci(vals, seed=seed, resamples=resamples)
    return {"value": float(vals.mean()), "ci": list(ci) if ci else None,
            "n_cards": int(vals.size)}


def _masked(cards: list[CardStats], name: str, seed: int, resamples: int) -> dict[str, Any]:
    if not cards:
        return {"value": None, "ci": None, "n_cards": 0}
    mask, vals = metric_arrays(cards, name)
    return _fig(vals[mask], seed, resamples)


def decide(p1: dict[str, Any], pk: dict[str, Any], gap: dict[str, Any], n: int,
           th: Thresholds) -> tuple[str, str]:
    """(verdict, why) from the row's figures; see the module's table."""
    if n < th.min_cards or p1["value"] is None or pk["value"] is None:
        return "not measurable", (f"{n} card(s) with enough samples; the table needs "
                                  f"{th.min_cards}")
    v1, c1 = p1["value"], p1["ci"] or [p1["value"]] * 2
    vk, ck = pk["value"], pk["ci"] or [pk["value"]] * 2
    vg, cg = gap["value"], gap["ci"] or [gap["value"]] * 2
    if v1 >= th.saturated and c1[0] >= th.sat_low:
        return "saturated", f"pass@1 {v1:.2f} (CI low {c1[0]:.2f}) >= {th.saturated}"
    if vg >= th.gap and cg[0] > 0:
        return "post-train", (f"pass@k exceeds pass@1 by {vg:.2f} (CI [{cg[0]:.2f}, "
                              f"{cg[1]:.2f}]): capable but unactivated")
    if ck[1] < th.low and vg < th.gap:
        return "change the base", (f"pass@k {vk:.2f} (CI high {ck[1]:.2f} < {th.low}) and "
                                   f"pass@1 {v1:.2f} close to it: a knowledge gap")
    return "not measurable", (f"pass@1 {v1:.2f}, pass@k {vk:.2f}, gap {vg:.2f} [{cg[0]:.2f}, "
                              f"{cg[1]:.2f}]: between the table's rules; draw more cards or "
                              "samples")


def diagnose_cards(cards: Iterable[CardStats], k: int | None = None, *, seed: int = 0,
                   resamples: int = DEFAULT_RESAMPLES,
                   thresholds: Thresholds | None = None) -> list[dict[str, Any]]:
    """One row per (family, horizon): ``family``, ``horizon``, ``verdict``, ``why``,
    ``pass@1``, ``pass@k`` (k = the samples drawn per card unless given), ``gap``,
    ``recovery``, ``boundary`` (correct/wrong give-up) and card counts."""
    th = thresholds or Thresholds()
    allc = list(cards)
    if not allc:
        raise ValueError("no episodes to diagnose")
    k = k or max(c.n_total for c in allc)
    groups: dict[tuple[str, str], list[CardStats]] = {}
    for c in allc:
        groups.setdefault((c.template.split("/", 1)[0], c.horizon), []).append(c)
    rows = []
    for (fam, hor), g in sorted(groups.items()):
        main = [c for c in g if c.feasible and not c.faults and c.n >= k]
        p1 = _fig(np.array([c.c / c.n for c in main]), seed, resamples)
        pkv = np.array([pass_at_k(c.n, c.c, k) for c in main])
        pk = _fig(pkv, seed, resamples)
        gap = _fig(pkv - np.array([c.c / c.n for c in main]), seed, resamples)
        verdict, why = decide(p1, pk, gap, len(main), th)
        infeasible = [c for c in g if not c.feasible]
        rows.append({
            "family": fam, "horizon": hor, "verdict": verdict, "why": why, "k": k,
            "pass@1": p1, "pass@k": pk, "gap": gap,
            "recovery": _masked(g, "recovery", seed, resamples),
            "boundary": {"correct_giveup": _masked(g, "boundary.correct_giveup", seed,
                                                   resamples),
                         "wrong_giveup": _masked(g, "boundary.wrong_giveup", seed, resamples)
                         if infeasible else {"value": None, "ci": None, "n_cards": 0}},
            "cards": len(g), "cards_main": len(main),
            "episodes": sum(c.n_total for c in g),
            "thresholds": asdict(th),
        })
    return rows


def diagnose_rows(rows: Iterable[dict[str, Any]], k: int | None = None,
                  **kw: Any) -> list[dict[str, Any]]:
    """The same from a stored run's episode rows (``Store.episodes``)."""
    return diagnose_cards(card_stats_from_rows(rows), k, **kw)


def _f(m: dict[str, Any] | None) -> str:
    if not m or m.get("value") is None:
        return "-"
    ci = m.get("ci")
    return f"{m['value']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


COLUMNS = ("family", "horizon", "verdict", "pass@1", "pass@k", "gap", "recovery",
           "correct give-up", "wrong give-up", "cards")


def row_cells(r: dict[str, Any]) -> list[str]:
    return [r["family"], r["horizon"], r["verdict"], _f(r["pass@1"]), _f(r["pass@k"]),
            _f(r["gap"]),
            _f(r["recovery"]), _f(r["boundary"]["correct_giveup"]),
            _f(r["boundary"]["wrong_giveup"]), f"{r['cards_main']}/{r['cards']}"]


def format_table(rows: list[dict[str, Any]]) -> str:
    """A plain-text table (one line per row, then each row's ``why``)."""
    k = rows[0]["k"] if rows else "k"
    head = [c if c != "pass@k" else f"pass@{k}" for c in COLUMNS]
    cells = [row_cells(r) for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines += [f"{r['family']}/{r['horizon']}: {r['verdict']} - {r['why']}" for r in rows]
    return "\n".join(lines)


def diagnosis_html(rows: list[dict[str, Any]]) -> str:
    """The rows as an HTML table with the rule that decided each (for ``ceiling report``)."""
    if not rows:
        return "<p>No episodes.</p>"
    k = rows[0]["k"]
    head = "".join(f"<th>{escape(c if c != 'pass@k' else f'pass@{k}')}</th>"
                   for c in COLUMNS) + "<th>why</th>"
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row_cells(r))
                   + f"<td>{escape(r['why'])}</td></tr>" for r in rows)
    return (f"<table><tr>{head}</tr>{body}</table><p class=note>Verdicts from the decision "
            "table in docs/study.md (ceiling diagnose): pass@k well above pass@1 - "
            "post-train; both low - change the base; pass@1 high - saturated. Intervals: "
            "95 % bootstrap over cards; recovery and give-up figures are shown, not used.</p>")


def diagnosis_cards(family: str, *, per_template: int = 1, tags: Iterable[str] = (),
                    card_seed: int = 0, n: int | None = None) -> list[Any]:
    """The cards ``diagnose`` plays on a family: every template (all ``tags``), each at
    ``per_template`` seeds from ``card_seed`` in the train, fault and infeasible variants
    (so recovery and boundary awareness are measured beside pass@k), interleaved by seed so
    that ``n`` (a cap) keeps every template."""
    from .._errors import ConfigError
    from ..envs import make, templates

    tags = list(tags)
    tpls = [t for t in templates(family) if all(tag in t.tags for tag in tags)]
    if not tpls:
        raise ConfigError(f"no template of {family!r} carries tags {tags}", where="--tags",
                          fix="see `ceiling envs list` for the tags")
    cards = [make(t.template_id(), seed=card_seed + i, variant=v)
             for i in range(per_template) for v in ("train", "fault", "infeasible")
             for t in tpls]
    return cards if n is None else cards[:n]


__all__ = ["COLUMNS", "VERDICTS", "Thresholds", "decide", "diagnose_cards", "diagnose_rows", "diagnosis_cards",
           "diagnosis_html", "format_table"]
