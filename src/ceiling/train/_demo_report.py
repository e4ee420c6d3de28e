"""Statistics and the HTML report of ``ceiling demo``.

pass@1 and pass@k per card use the unbiased estimator of Chen et al. 2021
(``ceiling.evaluate.pass_at_k``); the change in pass@1 gets a 95 % paired bootstrap
interval over cards (each card's after-minus-before pass rate, cards resampled with
replacement). The page is built with the evaluate team's report helpers
(``render_report``, ``svg_line_chart``, ``svg_bar_chart``): one self-contained HTML file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from ..rollout import Trajectory
from ..verify import Outcome


def per_card(trajs: Sequence[Trajectory]) -> dict[str, dict[str, Any]]:
    """card id -> {template, split, n, c} over episodes that are not infra errors."""
    out: dict[str, dict[str, Any]] = {}
    for t in trajs:
        d = out.setdefault(t.card_id, {"template": t.template or "?", "split": t.split,
                                       "n": 0, "c": 0, "infra": 0})
        if t.outcome == Outcome.INFRA_ERROR:
            d["infra"] += 1
            continue
        d["n"] += 1
        d["c"] += int(t.passed)
    return out


def rates(cards: dict[str, dict[str, Any]], k: int) -> dict[str, float | None]:
    from ..evaluate import pass_at_k

    ok = [d for d in cards.values() if d["n"] >= 1]
    if not ok:
        return {"pass@1": None, f"pass@{k}": None}
    p1 = sum(d["c"] / d["n"] for d in ok) / len(ok)
    okk = [d for d in ok if d["n"] >= k]
    pk = sum(pass_at_k(d["n"], d["c"], k) for d in okk) / len(okk) if okk else None
    return {"pass@1": p1, f"pass@{k}": pk}


def paired_diff(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], *,
                seed: int = 0, resamples: int = 2000) -> dict[str, Any]:
    """Mean over shared cards of (after - before) pass rate, with a paired bootstrap CI."""
    from ..evaluate import bootstrap_ci

    ids = sorted(i for i in before if i in after and before[i]["n"] and after[i]["n"])
    diffs = [after[i]["c"] / after[i]["n"] - before[i]["c"] / before[i]["n"] for i in ids]
    if not diffs:
        return {"value": None, "ci": None, "cards": 0, "excludes_zero": False}
    ci = bootstrap_ci(diffs, seed=seed, resamples=resamples, level=0.95)
    value = sum(diffs) / len(diffs)
    return {"value": value, "ci": list(ci) if ci else None, "cards": len(ids),
            "excludes_zero": bool(ci and (ci[0] > 0 or ci[1] < 0)),
            "method": f"paired percentile bootstrap over cards, {resamples} resamples, "
                      f"seed {seed}, 95%",
            "improved_cards": sum(d > 0 for d in diffs), "worse_cards": sum(d < 0 for d in diffs)}


def per_template(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]],
                 k: int) -> list[dict[str, Any]]:
    rows = []
    for tid in sorted({d["template"] for d in before.values()}):
        b = {i: d for i, d in before.items() if d["template"] == tid}
        a = {i: d for i, d in after.items() if d["template"] == tid}
        rb, ra = rates(b, k), rates(a, k)
        rows.append({"template": tid, "cards": len(b), "before": rb, "after": ra,
                     "delta_pass@1": None if rb["pass@1"] is None or ra["pass@1"] is None
                     else ra["pass@1"] - rb["pass@1"]})
    return rows


def pass_curve(cards: dict[str, dict[str, Any]], k: int) -> list[tuple[float, float]]:
    from ..evaluate import pass_at_k

    ok = [d for d in cards.values() if d["n"] >= k]
    if not ok:
        return []
    return [(j, sum(pass_at_k(d["n"], d["c"], j) for d in ok) / len(ok)) for j in range(1, k + 1)]


def learning_curve(metrics_file: Path, window: int = 5) -> list[tuple[float, float]]:
    """(cumulative rollouts, moving-average pass rate of the training rollouts)."""
    if not metrics_file.is_file():
        return []
    recs = [json.loads(x) for x in metrics_file.read_text().splitlines() if x.strip()]
    pts: list[tuple[float, float]] = []
    for i, r in enumerate(recs):
        win = recs[max(0, i - window + 1):i + 1]
        pts.append((float(r["unit"]["rollouts"]),
                    sum(w.get("pass_rate", 0.0) for w in win) / len(win)))
    return pts


def _f(v: float | None, d: int = 3) -> str:
    return "n/a" if v is None else f"{v:.{d}f}"


def render(result: dict[str, Any], before_trajs: Sequence[Trajectory],
           after_trajs: Sequence[Trajectory], metrics_file: Path) -> str:
    from ..evaluate import render_report, summarize, svg_bar_chart, svg_line_chart

    k = result["suite"]["k"]
    runs = []
    for name, trajs in (("base", before_trajs), ("trained", after_trajs)):
        try:
            runs.append({"name": name, **summarize(list(trajs), k=k)})
        except ValueError:
            pass
    d = result["diff"]
    head = (f"<p><b>Held-out pass@1: {_f(result['before']['pass@1'])} &rarr; "
            f"{_f(result['after']['pass@1'])}</b> (change {_f(d['value'], 3)}, 95% CI "
            f"[{_f(d['ci'][0] if d['ci'] else None)}, {_f(d['ci'][1] if d['ci'] else None)}], "
            f"{escape(d.get('method', ''))}). The interval "
            f"{'excludes' if d['excludes_zero'] else 'does NOT exclude'} zero. "
            f"pass@{k}: {_f(result['before'][f'pass@{k}'])} &rarr; "
            f"{_f(result['after'][f'pass@{k}'])}.</p>"
            f"<p>Base {escape(result['base'])} (weights SHA-256 "
            f"<code>{escape(result['base_sha256'][:16])}…</code>, unchanged: every gain is in the "
            f"adapter). Suite {escape(result['suite'].get('name', 'demo'))}: "
            f"{result['suite']['cards']} held-out cards (seeds never used "
            f"in training) × {k} samples at T=1, plus {result['suite']['heldout_cards']} cards "
            f"of the held-out structural variant, reported separately. Sandbox backend: "
            f"{escape(result['backend'])}.</p>")
    notes = "".join(f"<li>{escape(n)}</li>" for n in result.get("notes", []))
    if notes:
        head += f"<p>Notes:</p><ul>{notes}</ul>"
    lc = learning_curve(metrics_file)
    series = {"training rollouts (moving avg of 5 steps)": lc,
              "held-out pass@1 (before / after)": [
                  (0.0, result["before"]["pass@1"] or 0.0),
                  (float(result["training"]["unit"]["rollouts"]),
                   result["after"]["pass@1"] or 0.0)]}
    curve = svg_line_chart(series, title="Learning curve: pass rate against rollouts",
                           x_label="training rollouts", y_label="pass rate",
                           y_range=(0.0, 1.0), width=640)
    pk = svg_line_chart({"base": result["pass_curve"]["before"],
                         "trained": result["pass_curve"]["after"]},
                        title="pass@j before and after (held-out demo suite)", x_label="j",
                        y_label="pass@j", y_range=(0.0, 1.0))
    groups: dict[str, dict[str, Any]] = {}
    for row in result["per_template"]:
        short = row["template"].split("/")[-1]
        groups[short] = {"base": (row["before"]["pass@1"], None) if row["before"]["pass@1"]
                         is not None else None,
                         "trained": (row["after"]["pass@1"], None) if row["after"]["pass@1"]
                         is not None else None}
    bars = svg_bar_chart(groups, title="pass@1 per template", y_label="pass@1", width=640)
    rows = "".join(
        f"<tr><td>{escape(r['template'])}</td><td>{r['cards']}</td>"
        f"<td>{_f(r['before']['pass@1'])}</td><td>{_f(r['after']['pass@1'])}</td>"
        f"<td>{_f(r['delta_pass@1'], 3)}</td><td>{_f(r['before'][f'pass@{k}'])}</td>"
        f"<td>{_f(r['after'][f'pass@{k}'])}</td></tr>" for r in result["per_template"])
    table = (f"<table><tr><th>template</th><th>cards</th><th>pass@1 base</th>"
             f"<th>pass@1 trained</th><th>change</th><th>pass@{k} base</th>"
             f"<th>pass@{k} trained</th></tr>{rows}</table>")
    ho = result["heldout_variant"]
    ho_html = (f"<p>Held-out structural variant (names and extensions never seen in training "
               f"or pre-training): pass@1 {_f(ho['before']['pass@1'])} &rarr; "
               f"{_f(ho['after']['pass@1'])}, change {_f(ho['diff']['value'])} "
               f"(95% CI {ho['diff']['ci'] and [round(x, 3) for x in ho['diff']['ci']]}); "
               f"pass@{k} {_f(ho['before'][f'pass@{k}'])} &rarr; "
               f"{_f(ho['after'][f'pass@{k}'])}.</p>")
    u = result["training"]["unit"]
    unit = ("<table>" + "".join(f"<tr><td>{escape(key)}</td><td>{val:,.4g}</td></tr>"
                                for key, val in u.items()) + "</table>"
            f"<p>Checkpoint: <code>{escape(str(result['training']['checkpoint']))}</code>. "
            f"Verdict cache: {escape(json.dumps(result.get('verdict_cache', {})))} "
            f"(identical episodes reuse the real verifier's verdict).</p>")
    extra = [("What post-training bought", head), ("Learning curve", curve),
             ("pass@k before and after", pk), ("Per-template change", bars + table),
             ("Held-out structural variant", ho_html), ("The post-training unit", unit)]
    name = result["suite"].get("name", "demo")
    title = "ceiling demo" + ("" if name == "demo" else f" --suite {name}")
    return render_report(runs, title=f"{title}: GRPO on a frozen base",
                         extra_sections=extra)
