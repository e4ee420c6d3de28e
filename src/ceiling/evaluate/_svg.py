"""Inline SVG charts, written in Python so a report is one self-contained file (no CDN,
no JavaScript). Values are plain floats; intervals are drawn as bands or whiskers.

``svg_line_chart`` and ``svg_bar_chart`` are public: other reports (the trainer's demo
learning curve) use them for their own sections.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563",
           "#ca8a04")

Point = tuple[float, float]
Interval = tuple[float, float]


def _fmt(v: float) -> str:
    if v == 0 or 0.01 <= abs(v) < 10_000:
        return f"{v:.3g}" if abs(v) < 1 else f"{v:,.4g}"
    return f"{v:.2e}"


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    start = math.ceil(lo / step - 1e-9) * step
    out, v = [], start
    while v <= hi + 1e-9 * step:
        out.append(round(v, 12))
        v += step
    return out


def _frame(width: int, height: int, title: str, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" '
            f'font-family="system-ui, sans-serif" font-size="11">'
            f'<title>{escape(title)}</title>'
            f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13" '
            f'font-weight="600">{escape(title)}</text>' + "".join(body) + "</svg>")


def _legend(names: Sequence[str], x: float, y: float) -> list[str]:
    out = []
    for i, name in enumerate(names):
        yy = y + 14 * i
        out.append(f'<rect x="{x}" y="{yy - 8}" width="10" height="10" '
                   f'fill="{PALETTE[i % len(PALETTE)]}"/>'
                   f'<text x="{x + 14}" y="{yy + 1}">{escape(name[:28])}</text>')
    return out


def _axes(x0: float, y0: float, x1: float, y1: float, ylo: float, yhi: float,
          y_label: str, x_label: str) -> tuple[list[str], float]:
    """Grid, y ticks and labels; returns (elements, px per y unit)."""
    out = [f'<line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}" stroke="#333"/>',
           f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#333"/>']
    scale = (y1 - y0) / (yhi - ylo) if yhi > ylo else 1.0
    for t in _ticks(ylo, yhi):
        y = y1 - (t - ylo) * scale
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#e5e7eb"/>'
                   f'<text x="{x0 - 4}" y="{y + 3:.1f}" text-anchor="end">{_fmt(t)}</text>')
    if y_label:
        out.append(f'<text transform="translate(12 {(y0 + y1) / 2}) rotate(-90)" '
                   f'text-anchor="middle">{escape(y_label)}</text>')
    if x_label:
        out.append(f'<text x="{(x0 + x1) / 2}" y="{y1 + 30}" text-anchor="middle">'
                   f'{escape(x_label)}</text>')
    return out, scale


def _y_range(values: list[float], y_range: Interval | None) -> Interval:
    if y_range is not None:
        return y_range
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return (0.0, 1.0)
    lo, hi = min(0.0, min(vals)), max(vals)
    return (lo, hi if hi > lo else lo + 1.0)


def svg_line_chart(series: Mapping[str, Sequence[Point]], *, title: str = "",
                   x_label: str = "", y_label: str = "",
                   bands: Mapping[str, Sequence[Interval | None]] | None = None,
                   y_range: Interval | None = None, width: int = 460,
                   height: int = 280) -> str:
    """Lines (one per series name: ``[(x, y), ...]``), optional interval bands per point
    (``bands[name][i]`` = (lo, hi) for point i, or None), a legend. Returns ``<svg>`` text."""
    x0, y0, x1, y1 = 48.0, 28.0, width - 130.0, height - 40.0
    pts = [p for s in series.values() for p in s]
    allv = [y for _, y in pts] + [v for b in (bands or {}).values() for iv in b if iv for v in iv]
    ylo, yhi = _y_range(allv, y_range)
    xs = [x for x, _ in pts] or [0.0, 1.0]
    xlo, xhi = min(xs), max(xs)
    xspan = (xhi - xlo) or 1.0
    body, scale = _axes(x0, y0, x1, y1, ylo, yhi, y_label, x_label)

    def X(x: float) -> float:
        return x0 + (x - xlo) / xspan * (x1 - x0) if xhi > xlo else (x0 + x1) / 2

    def Y(y: float) -> float:
        return y1 - (min(max(y, ylo), yhi) - ylo) * scale

    xt = sorted(set(xs)) if len(set(xs)) <= 12 else _ticks(xlo, xhi, 6)
    for t in xt:
        body.append(f'<text x="{X(t):.1f}" y="{y1 + 14}" text-anchor="middle">{_fmt(t)}</text>')
    for i, (name, s) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        band = (bands or {}).get(name)
        if band:
            up = [(X(x), Y(iv[1])) for (x, _), iv in zip(s, band, strict=False) if iv]
            dn = [(X(x), Y(iv[0])) for (x, _), iv in zip(s, band, strict=False) if iv]
            if len(up) >= 2:
                poly = " ".join(f"{a:.1f},{b:.1f}" for a, b in up + dn[::-1])
                body.append(f'<polygon points="{poly}" fill="{color}" fill-opacity="0.15"/>')
            elif up:
                body.append(f'<line x1="{up[0][0]:.1f}" y1="{up[0][1]:.1f}" x2="{dn[0][0]:.1f}" '
                            f'y2="{dn[0][1]:.1f}" stroke="{color}" stroke-opacity="0.5"/>')
        good = [(x, y) for x, y in s if y is not None and math.isfinite(y)]
        if len(good) >= 2:
            path = " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in good)
            body.append(f'<polyline points="{path}" fill="none" stroke="{color}" '
                        f'stroke-width="2"/>')
        for x, y in good:
            body.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{color}">'
                        f'<title>{escape(name)}: x={_fmt(x)} y={_fmt(y)}</title></circle>')
    body += _legend(list(series), x1 + 12, y0 + 8)
    return _frame(width, height, title, body)


def svg_bar_chart(groups: Mapping[str, Mapping[str, tuple[float, Interval | None] | None]], *,
                  title: str = "", y_label: str = "", y_range: Interval | None = (0.0, 1.0),
                  width: int = 460, height: int = 280) -> str:
    """Grouped bars: ``groups[group][series] = (value, (lo, hi) or None)`` or None (no
    data: drawn as "n/a"). Intervals become whiskers. Returns ``<svg>`` text."""
    names: list[str] = []
    for g in groups.values():
        for s in g:
            if s not in names:
                names.append(s)
    n_g = max(len(groups), 1)
    rotate = max((len(g) for g in groups), default=0) * 6.2 > (width - 178.0) / n_g
    x0, y0, x1, y1 = (110.0 if rotate else 48.0), 28.0, width - 130.0, height - (
        90.0 if rotate else 40.0)
    allv = [v[0] for g in groups.values() for v in g.values() if v] + [
        b for g in groups.values() for v in g.values() if v and v[1] for b in v[1]]
    ylo, yhi = _y_range(allv, y_range)
    body, scale = _axes(x0, y0, x1, y1, ylo, yhi, y_label, "")
    gw = (x1 - x0) / n_g
    bw = min(28.0, gw * 0.8 / max(len(names), 1))

    def Y(y: float) -> float:
        return y1 - (min(max(y, ylo), yhi) - ylo) * scale

    for gi, (gname, g) in enumerate(groups.items()):
        gx = x0 + gi * gw + (gw - bw * len(names)) / 2
        cx = x0 + gi * gw + gw / 2
        if rotate:
            body.append(f'<text transform="translate({cx:.1f} {y1 + 10}) rotate(-30)" '
                        f'text-anchor="end" font-size="10">{escape(gname[:34])}</text>')
        else:
            body.append(f'<text x="{cx:.1f}" y="{y1 + 14}" text-anchor="middle">'
                        f'{escape(gname[:22])}</text>')
        for si, s in enumerate(names):
            bx = gx + si * bw
            v = g.get(s)
            if v is None or v[0] is None:
                if s in g:
                    body.append(f'<text x="{bx + bw / 2:.1f}" y="{y1 - 4}" font-size="8" '
                                f'text-anchor="middle" fill="#888">n/a</text>')
                continue
            val, iv = v
            base = Y(max(ylo, min(0.0, yhi)))
            top = Y(val)
            color = PALETTE[si % len(PALETTE)]
            body.append(f'<rect x="{bx + 1:.1f}" y="{min(top, base):.1f}" width="{bw - 2:.1f}" '
                        f'height="{max(abs(base - top), 0.8):.1f}" fill="{color}">'
                        f'<title>{escape(gname)} / {escape(s)}: {_fmt(val)}'
                        + (f" [{_fmt(iv[0])}, {_fmt(iv[1])}]" if iv else "")
                        + "</title></rect>")
            if iv:
                cx = bx + bw / 2
                body.append(f'<line x1="{cx:.1f}" y1="{Y(iv[0]):.1f}" x2="{cx:.1f}" '
                            f'y2="{Y(iv[1]):.1f}" stroke="#111" stroke-width="1.2"/>'
                            f'<line x1="{cx - 3:.1f}" y1="{Y(iv[0]):.1f}" x2="{cx + 3:.1f}" '
                            f'y2="{Y(iv[0]):.1f}" stroke="#111"/>'
                            f'<line x1="{cx - 3:.1f}" y1="{Y(iv[1]):.1f}" x2="{cx + 3:.1f}" '
                            f'y2="{Y(iv[1]):.1f}" stroke="#111"/>')
    body += _legend(names, x1 + 12, y0 + 8)
    return _frame(width, height, title, body)


__all__ = ["PALETTE", "svg_bar_chart", "svg_line_chart"]
