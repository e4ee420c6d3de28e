"""A study's figures (``analyse``) and its one-file HTML report (``render``).

``analyse(cfg, evals)`` works on whatever evaluations exist (a partial study too) and
returns the JSON written to ``study.json``: per optimizer and rung the budget (rollouts,
with tokens and trainer FLOPs beside, means over seeds), held-out pass@1, pass@k and
diversity with hierarchical bootstrap intervals over seeds and cards, the saturating fits
(``_fit.py``) of pass@1 and pass@k against rollouts, the paired change against the base at
the top rung every optimizer reached, the answer to "does GRPO lose pass@k where ES keeps
it", and the list of missing units. ``render(result)`` returns ``(html, {name: svg})``; the
charts reuse :func:`ceiling.evaluate.svg_line_chart`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from typing import Any

import numpy as np

from ..evaluate import REPORT_CSS, html_table, svg_line_chart
from ._analysis import METRICS, hierarchical, matrix, pass_k_verdict
from ._config import StudyConfig
from ._fit import fit_saturating


def analyse(cfg: StudyConfig, evals: list[dict[str, Any]]) -> dict[str, Any]:
    k = cfg.eval.k
    boot = {"resamples": cfg.eval.resamples, "seed": 0}
    base = next((e for e in evals if e["label"] == "base"), None)
    order = sorted(base["cards"]) if base else sorted({c for e in evals for c in e["cards"]})
    out: dict[str, Any] = {"k": k, "ladder": cfg.ladder, "seeds": cfg.seeds,
                           "optimizers": list(cfg.optimizers), "cards": len(order),
                           "created": datetime.now(UTC).isoformat(timespec="seconds"),
                           "config": cfg.model_dump(mode="json")}
    base_m = {m: matrix([base], m, k, order) for m in METRICS} if base else {}
    out["base"] = {m: hierarchical(v, **boot) for m, v in base_m.items()} if base else None
    curves: dict[str, list[dict[str, Any]]] = {}
    missing: list[str] = [] if base else ["base"]
    for opt in cfg.optimizers:
        rows = []
        for r in cfg.ladder:
            es = [e for e in evals if e.get("optimizer") == opt and e.get("rollouts") == r]
            have = {e["seed"] for e in es}
            missing += [f"{opt}-s{s}-r{r}" for s in cfg.seeds if s not in have]
            if not es:
                continue
            units = [e["unit"] for e in es if e.get("unit")]
            row: dict[str, Any] = {
                "rollouts": r, "seeds": sorted(have),
                "tokens": float(np.mean([u["generated_tokens"] + u["prompt_tokens"]
                                         for u in units])) if units else None,
                "generated_tokens": float(np.mean([u["generated_tokens"] for u in units]))
                if units else None,
                "trainer_flops": float(np.mean([u["trainer_flops"] for u in units]))
                if units else None,
                "train_wall_s": float(np.mean([u["wall_s"] for u in units])) if units else None,
            }
            for m in METRICS:
                row[m] = hierarchical(matrix(es, m, k, order), **boot)
            rows.append(row)
        curves[opt] = rows
    out["curves"] = curves
    out["missing"] = missing
    out["complete"] = not missing
    # fits: base (x = 0) and every per-seed point
    fits: dict[str, dict[str, Any]] = {}
    for opt, rows in curves.items():
        fits[opt] = {}
        for m in ("pass@1", "pass@k"):
            xs, ys = [], []
            if out["base"] and out["base"][m]["value"] is not None:
                xs.append(0.0)
                ys.append(out["base"][m]["value"])
            for row in rows:
                for v in row[m].get("per_seed") or []:
                    if v is not None:
                        xs.append(float(row["rollouts"]))
                        ys.append(v)
            f = fit_saturating(xs, ys, threshold=cfg.fit.threshold)
            fits[opt][m] = f.to_dict() if f else None
    out["fits"] = fits
    # paired change against the base at the highest rung every optimizer has
    common = [r for r in cfg.ladder if all(any(row["rollouts"] == r for row in rows)
                                          for rows in curves.values())] if curves else []
    changes: dict[str, dict[str, Any]] = {}
    if base and common:
        top = common[-1]
        for opt in cfg.optimizers:
            es = [e for e in evals if e.get("optimizer") == opt and e.get("rollouts") == top]
            changes[opt] = {"rollouts": top}
            for m in METRICS:
                changes[opt][m] = hierarchical(matrix(es, m, k, order) - base_m[m], **boot)
    out["change_at_top"] = changes
    ans = pass_k_verdict({o: c["pass@k"] for o, c in changes.items()})
    if changes:
        div = "; ".join(f"{NAMES.get(o, o)} {_f(c['diversity'], 2, sign=True)}"
                        for o, c in changes.items())
        ans["diversity"] = (f"distinct successful action sequences per card, change vs the "
                            f"base: {div}")
    if base and (out["base"]["pass@k"]["value"] or 0) >= 0.99:
        ans["ceiling_note"] = (f"the base already solves every held-out card at least once "
                               f"in {k} samples (pass@{k} = {out['base']['pass@k']['value']:.2f})"
                               f": pass@{k} can only fall here, so this tests whether it "
                               f"falls, not whether it rises; diversity is the finer measure "
                               f"of what sharpening costs")
    out["grpo_loses_pass_k"] = ans
    out["bootstrap"] = {**boot, "level": 0.95,
                        "method": "hierarchical percentile bootstrap: seeds, then cards "
                                  "(shared), with replacement"}
    return out


def _f(m: dict[str, Any] | None, d: int = 3, sign: bool = False) -> str:
    if not m or m.get("value") is None:
        return "n/a"
    s = "+" if sign else ""
    ci = m.get("ci")
    return f"{m['value']:{s}.{d}f}" + (f" [{ci[0]:{s}.{d}f}, {ci[1]:{s}.{d}f}]" if ci else "")


def _sci(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3g}"


NAMES = {"grpo": "GRPO", "es": "ES"}


def charts(result: dict[str, Any]) -> dict[str, str]:
    """SVG charts: held-out pass@1, pass@k and diversity against rollouts (mean over seeds,
    95 % band, fitted curve dashed in the legend as "fit")."""
    k = result["k"]
    out: dict[str, str] = {}
    top = max(result["ladder"])
    for m, title in (("pass@1", "held-out pass@1"), ("pass@k", f"held-out pass@{k}"),
                     ("diversity", "distinct successful action sequences per card")):
        series: dict[str, list[tuple[float, float]]] = {}
        bands: dict[str, list[Any]] = {}
        for opt, rows in result["curves"].items():
            name = NAMES.get(opt, opt)
            pts, bd = [], []
            if result["base"] and result["base"][m]["value"] is not None:
                pts.append((0.0, result["base"][m]["value"]))
                bd.append(tuple(result["base"][m]["ci"]) if result["base"][m]["ci"] else None)
            for row in rows:
                if row[m]["value"] is not None:
                    pts.append((float(row["rollouts"]), row[m]["value"]))
                    bd.append(tuple(row[m]["ci"]) if row[m]["ci"] else None)
            series[name], bands[name] = pts, bd
            fit = (result["fits"].get(opt) or {}).get(m)
            if fit:
                xs = np.linspace(0, top, 9)
                ys = fit["y0"] + (fit["ymax"] - fit["y0"]) * xs / (xs + fit["x50"])
                series[f"{name} fit"] = [(float(a), float(b)) for a, b in zip(xs, ys,
                                                                            strict=True)]
        yr = (0.0, 1.0) if m != "diversity" else None
        out[m.replace("@", "")] = svg_line_chart(series, bands=bands, title=title,
                                                 x_label="rollouts", y_label=m, y_range=yr,
                                                 width=520, height=300)
    return out


def render(result: dict[str, Any]) -> tuple[str, dict[str, str]]:
    k = result["k"]
    svgs = charts(result)
    cfg = result["config"]
    parts = [(f"<!doctype html><html lang=en><head><meta charset=utf-8><title>ceiling study"
             f"</title><style>{REPORT_CSS}</style></head><body>"),
             (f"<h1>What post-training buys: {escape(cfg['base'])}</h1>"
             f"<p class=note>{escape(result['created'])}. Optimizers "
             f"{', '.join(NAMES.get(o, o) for o in result['optimizers'])}; seeds "
             f"{result['seeds']}; ladder {result['ladder']} rollouts; {result['cards']} "
             f"held-out cards x {k} samples per checkpoint. Intervals: "
             f"{escape(result['bootstrap']['method'])}, 95 %.</p>")]
    if not result["complete"]:
        parts.append(f"<p class=bad>Partial study: {len(result['missing'])} evaluation(s) "
                     f"missing: {escape(', '.join(result['missing'][:40]))}</p>")
    ans = result["grpo_loses_pass_k"]
    parts.append(f"<h2>Does GRPO lose pass@{k} where ES keeps it?</h2>"
                 f"<p><b>{escape(ans['answer'])}</b>. {escape(ans.get('why', ''))}.</p>"
                 + "".join(f"<p>{escape(ans[key])}.</p>" for key in ("diversity",
                                                                    "ceiling_note")
                           if ans.get(key)))
    parts.append("<div class=charts>" + "".join(svgs.values()) + "</div>")
    head = ["optimizer", "rollouts", "tokens", "trainer FLOPs", "pass@1", f"pass@{k}",
            "diversity", "seeds"]
    rows = []
    if result["base"]:
        b = result["base"]
        rows.append(["base", "0", "0", "0", _f(b["pass@1"]), _f(b["pass@k"]),
                     _f(b["diversity"], 2), "-"])
    for opt, rs in result["curves"].items():
        for r in rs:
            rows.append([NAMES.get(opt, opt), str(r["rollouts"]), _sci(r["tokens"]),
                         _sci(r["trainer_flops"]), _f(r["pass@1"]), _f(r["pass@k"]),
                         _f(r["diversity"], 2), ",".join(map(str, r["seeds"]))])
    parts.append("<h2>The ladder</h2>" + html_table(head, rows))
    frows = []
    for opt, fs in result["fits"].items():
        for m, f in fs.items():
            if not f:
                frows.append([NAMES.get(opt, opt), m, "not identified (< 3 budgets)", "", "",
                              "", ""])
                continue
            sb = f["stop_budget"]
            if not f.get("identified", True):
                last = f"not identified: {f.get('why', '')}"
            else:
                last = "n/a (no gain)" if sb is None else f"{sb:.3g}"
            frows.append([NAMES.get(opt, opt), m, f"{f['y0']:.3f}", f"{f['ymax']:.3f}",
                          f"{f['x50']:.3g}", f"{f['rmse']:.3f}", last])
    thr = cfg["fit"]["threshold"]
    parts.append(f"<h2>Saturating fits</h2><p>y = y0 + (ymax - y0) x / (x + x50), x in "
                 f"rollouts; the last column is the budget past which one more doubling "
                 f"gains less than {thr} (0: never as much).</p>"
                 + html_table(["optimizer", "metric", "y0", "ymax", "x50", "rmse",
                           "stop budget"], frows, num_from=2))
    crows = [[NAMES.get(o, o), str(c["rollouts"]), _f(c["pass@1"], sign=True),
              _f(c["pass@k"], sign=True), _f(c["diversity"], 2, sign=True)]
             for o, c in result["change_at_top"].items()]
    parts.append("<h2>Change against the base at the top common rung</h2>"
                 "<p>Paired per card (same held-out cards and sampling seeds).</p>"
                 + html_table(["optimizer", "rollouts", "pass@1", f"pass@{k}", "diversity"], crows))
    parts.append("</body></html>")
    return "\n".join(parts), svgs


__all__ = ["analyse", "charts", "render"]
