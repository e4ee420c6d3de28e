"""The HTML report: one self-contained file (inline CSS and SVG, no script, no CDN).

``render_report(runs, comparisons=..., extra_sections=[(title, html)])`` returns the page;
``runs`` are stored :class:`RunRecord` s or bare summary dicts (what ``summarize`` returns,
plus an optional ``name``), so a caller with trajectories in hand (the trainer's demo) can
render without the store and add its own sections (e.g. a learning curve drawn with
:func:`svg_line_chart`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from .. import __version__
from ._store import RunRecord
from ._svg import PALETTE, svg_bar_chart, svg_line_chart

REPORT_CSS = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1060px;color:#111;
 line-height:1.4;padding:0 16px}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;margin-top:28px;
 border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f4f6} td.num{text-align:right;font-variant-numeric:tabular-nums}
.charts{display:flex;flex-wrap:wrap;gap:12px} .note{color:#555;font-size:12px}
.bad{color:#b91c1c;font-weight:600} .good{color:#15803d;font-weight:600}
.swatch{display:inline-block;width:10px;height:10px;margin-right:4px}
code{background:#f3f4f6;padding:0 3px}
"""


def _as_summary(run: RunRecord | Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    if isinstance(run, RunRecord):
        return run.label, {**run.summary, "created": run.created}
    s = dict(run)
    return str(s.get("name") or s.get("run_id") or "run"), s


def _fmt_rate(m: Mapping[str, Any] | None, digits: int = 3) -> str:
    if not m or m.get("value") is None:
        return "n/a"
    ci = m.get("ci")
    ci_txt = f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else ""
    return f"{m['value']:.{digits}f}{ci_txt}"


def _bar(m: Mapping[str, Any] | None) -> tuple[float, tuple[float, float] | None] | None:
    if not m or m.get("value") is None:
        return None
    ci = m.get("ci")
    return (float(m["value"]), (float(ci[0]), float(ci[1])) if ci else None)


def html_table(head: Sequence[str], rows: Sequence[Sequence[str]], num_from: int = 1) -> str:
    """An HTML table (cells escaped; columns from ``num_from`` on right-aligned as numbers)."""
    h = "".join(f"<th>{escape(c)}</th>" for c in head)
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{c}</td>' if i >= num_from else f"<td>{c}</td>"
                         for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def _runs_section(runs: list[tuple[str, dict[str, Any]]]) -> str:
    rows = []
    for i, (label, s) in enumerate(runs):
        sw = f'<span class="swatch" style="background:{PALETTE[i % len(PALETTE)]}"></span>'
        rows.append([sw + escape(label), escape(str(s.get("policy", ""))),
                     escape(str(s.get("suite", ""))), (f"<code>{escape(str(s.get('key', '')))}"
                     "</code>"), str(s.get("cards", "")), str(s.get("episodes", "")),
                     str(s.get("k", "")), _fmt_rate(s.get("pass@1")),
                     _fmt_rate(s.get("pass@k")),
                     (f'<span class="bad">{s["infra_errors"]}</span>' if s.get("infra_errors")
                      else "0")])
    warn = "".join(
        f"<p class=bad>{escape(label)}: {s['infra_errors']} of {s.get('episodes')} episodes "
        "were infrastructure errors, left out of every rate. Most frequent: "
        + "; ".join(f"{m['count']}x {escape(m['message'])}"
                    for m in s.get("infra_error_messages", [])) + "</p>"
        for label, s in runs if s.get("infra_errors"))
    return html_table(["run", "policy", "suite", "key", "cards", "episodes", "k", "pass@1 [95% CI]",
                   "pass@k [95% CI]", "infra errors"], rows, num_from=4) + warn


def _groups(runs: list[tuple[str, dict[str, Any]]], field: str) -> dict[str, dict[str, Any]]:
    keys: list[str] = []
    for _, s in runs:
        for k in s.get(field) or {}:
            if k not in keys:
                keys.append(k)
    order = {"short": 0, "medium": 1, "long": 2}
    keys.sort(key=lambda k: (order.get(k, 9), k))
    return {k: {label: _bar((s.get(field) or {}).get(k)) for label, s in runs} for k in keys}


def _template_chart(runs: list[tuple[str, dict[str, Any]]]) -> str:
    groups = _groups(runs, "by_template")
    families = {g.split("/", 1)[0] for g in groups}
    title = "Completion by template"
    if len(families) == 1:  # one family: drop the common prefix from the labels
        title += f" ({next(iter(families))})"
        groups = {g.split("/", 1)[-1]: v for g, v in groups.items()}
    width = max(600, 180 + len(groups) * (14 * len(runs) + 40))
    return svg_bar_chart(groups, title=title, y_label="pass rate", width=min(width, 1040),
                         height=340)


def _charts(runs: list[tuple[str, dict[str, Any]]]) -> str:
    series, bands = {}, {}
    for label, s in runs:
        curve = s.get("pass_curve") or {}
        pts = [(float(k), v["value"]) for k, v in sorted(curve.items(), key=lambda x: int(x[0]))
               if v.get("value") is not None]
        series[label] = pts
        bands[label] = [tuple(v["ci"]) if v.get("ci") else None
                        for k, v in sorted(curve.items(), key=lambda x: int(x[0]))
                        if v.get("value") is not None]
    parts = [
        "<h2>pass@k and horizon</h2><div class=charts>"
        + svg_line_chart(series, bands=bands, title="pass@k (unbiased estimator, 95% CI band)",
                         x_label="k (samples per card)", y_label="pass@k", y_range=(0, 1))
        + svg_bar_chart(_groups(runs, "by_horizon"), title="Completion by horizon",
                        y_label="pass rate")
        + "</div>",
        "<h2>Per family</h2><div class=charts>"
        + svg_bar_chart(_groups(runs, "by_type"), title="Completion by type (family)",
                        y_label="pass rate")
        + _template_chart(runs)
        + "</div>",
    ]
    rb: dict[str, dict[str, Any]] = {"recovery (faults)": {}, "correct give-up": {},
                                     "wrong give-up (lower=better)": {}}
    gap: dict[str, dict[str, Any]] = {"training range": {}, "held-out": {}}
    for label, s in runs:
        b = s.get("boundary") or {}
        rb["recovery (faults)"][label] = _bar(s.get("recovery"))
        rb["correct give-up"][label] = _bar(b.get("correct_giveup"))
        rb["wrong give-up (lower=better)"][label] = _bar(b.get("wrong_giveup"))
        g = s.get("heldout_gap") or {}
        gap["training range"][label] = (g["train"], None) if g.get("train") is not None else None
        gap["held-out"][label] = (g["heldout"], None) if g.get("heldout") is not None else None
    parts.append("<h2>Recovery and boundary awareness</h2><div class=charts>"
                 + svg_bar_chart(rb, title="Recovery and boundary awareness", y_label="rate",
                                 width=520)
                 + svg_bar_chart(gap, title="Training range vs held-out variants",
                                 y_label="pass rate")
                 + "</div>")
    rows = []
    for label, s in runs:
        b = s.get("boundary") or {}
        pe = s.get("per_episode") or {}
        rows.append([escape(label), _fmt_rate(s.get("recovery")),
                     _fmt_rate(b.get("correct_giveup")),
                     _fmt_rate(b.get("wrong_giveup")) + f" <span class=note>"
                     f"({escape(str(b.get('wrong_giveup_basis', '')))})</span>",
                     _fmt_rate(s.get("heldout_gap")), _fmt_rate(pe.get("steps"), 1),
                     _fmt_rate(pe.get("tokens"), 0), _fmt_rate(pe.get("seconds"), 2)])
    parts.append(html_table(["run", "recovery", "correct give-up", "wrong give-up",
                         "held-out gap (train - heldout)", "steps / episode",
                         "tokens / episode", "seconds / episode"], rows))
    return "".join(parts)


def _outcomes(runs: list[tuple[str, dict[str, Any]]]) -> str:
    names: list[str] = []
    for _, s in runs:
        names += [o for o in (s.get("outcomes") or {}) if o not in names]
    rows = [[escape(label)] + [str((s.get("outcomes") or {}).get(o, 0)) for o in names]
            for label, s in runs]
    return "<h2>Outcomes</h2>" + html_table(["run", *names], rows)


def _comparison(c: Mapping[str, Any]) -> str:
    a, b = c["a"], c["b"]
    la, lb = escape(a.get("name") or a["id"]), escape(b.get("name") or b["id"])
    head = f"<h3>{lb} vs {la}</h3>"
    if c.get("differing_parts"):
        head += (f'<p class="bad">Keys differ in {escape(", ".join(c["differing_parts"]))}: '
                 "compared anyway (--force); deltas may not mean what they seem.</p>")
    rows = []
    for name, m in c["metrics"].items():
        if m.get("delta") is None:
            continue
        lo, hi = m["ci"]
        sig = hi < 0 or lo > 0
        cls = ("bad" if m["delta"] < 0 else "good") if sig else ""
        if name in ("boundary.wrong_giveup", "heldout_gap", "steps", "tokens", "seconds") and sig:
            cls = "good" if m["delta"] < 0 else "bad"
        rows.append([escape(name), f"{m['a']:.3f}", f"{m['b']:.3f}",
                     f'<span class="{cls}">{m["delta"]:+.3f}</span>',
                     f"[{lo:+.3f}, {hi:+.3f}]", str(m["n_cards"])])
    mc = c["mcnemar"]
    flips = c["flipped"]
    fl = "".join(f"<li>{escape(f['card'])}: {f['a']:.2f} &rarr; {f['b']:.2f}</li>"
                 for f in flips["regressed"][:30])
    fi = "".join(f"<li>{escape(f['card'])}: {f['a']:.2f} &rarr; {f['b']:.2f}</li>"
                 for f in flips["improved"][:30])
    return (head + html_table(["metric", la, lb, "delta", "95% CI (paired)", "cards"], rows)
            + f"<p class=note>{c['shared_cards']} shared cards; McNemar exact p = {mc['p']:.3g}"
            f" ({mc['pass_to_fail']} pass&rarr;fail, {mc['fail_to_pass']} fail&rarr;pass; "
            f"{escape(mc['basis'])}).</p>"
            f"<p>Regressed cards ({len(flips['regressed'])}):</p><ul>{fl or '<li>none</li>'}</ul>"
            f"<p>Improved cards ({len(flips['improved'])}):</p><ul>{fi or '<li>none</li>'}</ul>")


def render_report(runs: Sequence[RunRecord | Mapping[str, Any]], *,
                  title: str = "ceiling evaluation report",
                  comparisons: Sequence[Mapping[str, Any]] = (),
                  extra_sections: Sequence[tuple[str, str]] = ()) -> str:
    """The report page as one HTML string. ``comparisons`` are :func:`compare` results;
    ``extra_sections`` are (title, trusted HTML) pairs appended in order."""
    rs = [_as_summary(r) for r in runs]
    boot = next((s.get("bootstrap") for _, s in rs if s.get("bootstrap")), None)
    note = (f"Intervals: {boot['method']}, {boot['resamples']} resamples, seed {boot['seed']}, "
            f"level {boot['level']:.0%}." if boot else "")
    parts = [(f"<!doctype html><html lang=en><head><meta charset=utf-8>"
             f"<title>{escape(title)}</title><style>{REPORT_CSS}</style></head><body>"),
             (f"<h1>{escape(title)}</h1><p class=note>ceiling {escape(__version__)}, "
             f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}. An episode passes when it is "
             f"solved or a correct abstention; infra errors are left out of every rate. "
             f"{escape(note)}</p>")]
    if rs:
        parts += ["<h2>Runs</h2>", _runs_section(rs), _charts(rs), _outcomes(rs)]
    else:
        parts.append("<p>No runs.</p>")
    if comparisons:
        parts.append("<h2>Run-to-run comparison</h2>")
        parts += [_comparison(c) for c in comparisons]
    for t, html in extra_sections:
        parts.append(f"<h2>{escape(t)}</h2>{html}")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(html: str, out: str | os.PathLike[str]) -> Path:
    """Write atomically (temp file + rename); returns the path."""
    p = Path(out)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, p)
    return p


__all__ = ["render_report", "write_report"]
