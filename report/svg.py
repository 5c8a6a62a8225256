"""Inline SVG charts for the report. Readable without colour: every series has its own fill
pattern (solid, hatch, dots, cross, empty) as well as a hue, and every bar carries its number.
Every number drawn carries `data-k`, the key tests read back from the DOM."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Sequence

from shinken.report.figures import Bin, Row, Timing

FONT = 12
LABEL_W = 150  # left column of bar labels, at least; wider when a label needs it
CHAR_W = 7.2  # a character's width at FONT, rounded up from DejaVu Sans (6.4-6.8 px): texts are sized by it
MAX_LABEL_SHARE = 0.45  # of the chart's width; a longer label is shortened with an ellipsis (full text on hover)
BAR_H = 18
GAP = 8


@dataclass(frozen=True)
class Series:
    key: str
    label: str
    pattern: str  # id of a <pattern> in DEFS


# pattern id -> (hue, drawing); the hue only adds to a pattern that reads alone in grey.
PATTERNS = {
    "solid-green": ("#2f855a", "solid"), "hatch-amber": ("#b7791f", "hatch"), "dots-red": ("#c53030", "dots"),
    "solid-blue": ("#2b6cb0", "solid"), "hatch-grey": ("#4a5568", "hatch"), "cross-red": ("#9b2c2c", "cross"),
    "empty": ("#4a5568", "empty"), "solid-slate": ("#4a5568", "solid"),
}


def _pattern(pid: str) -> str:
    hue, kind = PATTERNS[pid]
    if kind == "solid":
        return f'<pattern id="{pid}" width="4" height="4" patternUnits="userSpaceOnUse"><rect width="4" height="4" fill="{hue}"/></pattern>'
    body = {
        "hatch": f'<path d="M-1,1 l2,-2 M0,6 l6,-6 M5,7 l2,-2" stroke="{hue}" stroke-width="1.6"/>',
        "dots": f'<circle cx="3" cy="3" r="1.5" fill="{hue}"/>',
        "cross": f'<path d="M0,0 L6,6 M6,0 L0,6" stroke="{hue}" stroke-width="1.2"/>',
        "empty": "",
    }[kind]
    return (f'<pattern id="{pid}" width="6" height="6" patternUnits="userSpaceOnUse">'
            f'<rect width="6" height="6" fill="#fff"/>{body}</pattern>')


DEFS = ('<svg class="defs" width="0" height="0" aria-hidden="true" focusable="false"><defs>'
        + "".join(_pattern(p) for p in PATTERNS) + "</defs></svg>")


def _text(x: float, y: float, s: str, *, key: str | None = None, anchor: str = "start", cls: str = "") -> str:
    k = f' data-k="{escape(key)}"' if key else ""
    c = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{c}{k}>{escape(s)}</text>'


def _text_w(s: str) -> float:
    return len(s) * CHAR_W


def _label_w(labels: Sequence[str], width: int) -> tuple[float, int]:
    """The label column's width (the longest label fits, within MAX_LABEL_SHARE of the chart) and
    the most characters a label may show in it."""
    most = int(width * MAX_LABEL_SHARE)
    need = max((_text_w(s) for s in labels), default=0.0) + 12
    col = min(max(float(LABEL_W), need), float(most))
    return col, int((col - 12) / CHAR_W + 1e-6)


def _label(x: float, y: float, s: str, fits: int) -> str:
    """A row label ending at x; one too long for its column is shortened, the full text its tooltip."""
    if len(s) <= fits:
        return _text(x, y, s, anchor="end")
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="end"><title>{escape(s)}</title>'
            f"{escape(s[:max(fits - 1, 1)])}…</text>")


def _rect(x: float, y: float, w: float, h: float, pattern: str, title: str) -> str:
    return (f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{h:.1f}" fill="url(#{pattern})" '
            f'stroke="#1a202c" stroke-width="0.8"><title>{escape(title)}</title></rect>')


def _svg(width: float, height: float, body: list[str], label: str) -> str:
    return (f'<svg class="chart" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" height="{height:.0f}" '
            f'role="img" aria-label="{escape(label)}" font-size="{FONT}">' + "".join(body) + "</svg>")


def legend(series: Sequence[Series], counts: dict[str, int] | None = None, key: str = "") -> str:
    """The swatch of each series; with `counts`, each series' number beside its name (so a
    segment too narrow to carry its number still has it next to the figure)."""
    def count(s: Series) -> str:
        if counts is None:
            return ""
        return f' <b data-k="{escape(key)}.{escape(s.key)}">{counts.get(s.key, 0)}</b>'

    items = "".join(
        f'<span class="key"><svg width="18" height="12" aria-hidden="true"><rect width="18" height="12" '
        f'fill="url(#{s.pattern})" stroke="#1a202c" stroke-width="0.8"/></svg>{escape(s.label)}{count(s)}</span>'
        for s in series)
    return f'<p class="legend">{items}</p>'


def stacked_bars(rows: Sequence[Row], series: Sequence[Series], key: str, label: str, width: int = 760) -> str:
    """One horizontal bar per row, a segment per series; segment numbers inside when they
    fit, the row total after the bar. Keys: `<key>.<row>.<series>`, `<key>.<row>.total`."""
    label_w, fits = _label_w([r.label for r in rows], width)
    most = max((r.total for r in rows), default=0) or 1
    plot = width - label_w - 12 - _text_w(str(most))  # the longest total fits after the longest bar
    body = []
    for i, r in enumerate(rows):
        y = GAP + i * (BAR_H + GAP)
        body.append(_label(label_w - 6, y + BAR_H - 5, r.label, fits))
        x = label_w
        for s in series:
            n = r.parts.get(s.key, 0)
            w = plot * n / most
            if n:
                body.append(_rect(x, y, w, BAR_H, s.pattern, f"{r.label}: {s.label} {n}"))
                if w >= 8 * len(str(n)) + 6:
                    body.append(_text(x + w / 2, y + BAR_H - 5, str(n), key=f"{key}.{r.key}.{s.key}",
                                      anchor="middle", cls="in"))
            x += w
        body.append(_text(x + 6, y + BAR_H - 5, str(r.total), key=f"{key}.{r.key}.total", cls="total"))
    return _svg(width, GAP + len(rows) * (BAR_H + GAP), body, label)


def histogram(bins: Sequence[Bin], series: Sequence[Series], edges: tuple[float, float], key: str, label: str,
              width: int = 760, height: int = 260) -> str:
    """Vertical bars over [0, 1], stacked by series, the count above each bar; the band
    between the two edges is shaded and both edges are drawn and labelled."""
    left, right, top, bottom = 40, 20, 40, 40
    pw, ph = width - left - right, height - top - bottom
    most = max((b.total for b in bins), default=0) or 1
    lo, hi = edges
    x_of = lambda v: left + pw * v  # noqa: E731
    # The edge labels sit above the tallest bar's count (drawn at top - 4).
    body = [f'<rect x="{x_of(lo):.1f}" y="{top}" width="{x_of(hi) - x_of(lo):.1f}" height="{ph}" fill="#edf2f7"/>']
    for name, v, anchor in (("min-pass", lo, "end"), ("max-pass", hi, "start")):
        body.append(f'<line x1="{x_of(v):.1f}" y1="{top - 30}" x2="{x_of(v):.1f}" y2="{top + ph}" stroke="#1a202c" '
                    f'stroke-dasharray="5 3" stroke-width="1.2"/>')
        body.append(_text(x_of(v) + (-4 if anchor == "end" else 4), top - 22, f"{name} {v:g}", anchor=anchor,
                          cls="edge", key=f"{key}.edge.{name}"))
    body.append(_text((x_of(lo) + x_of(hi)) / 2, top - 22, "band", anchor="middle", cls="edge"))
    bw = pw / max(len(bins), 1)
    for i, b in enumerate(bins):
        x, y = x_of(b.lo) + 3, float(top + ph)
        for s in series:
            n = b.parts.get(s.key, 0)
            if n:
                h = ph * n / most
                y -= h
                body.append(_rect(x, y, bw - 6, h, s.pattern, f"{b.lo:.1f}-{b.hi:.1f}: {s.label} {n}"))
        body.append(_text(x + (bw - 6) / 2, y - 4, str(b.total), key=f"{key}.bin.{i}", anchor="middle", cls="total"))
    body.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#1a202c"/>')
    for i in range(len(bins) + 1):
        v = i / len(bins)
        body.append(_text(x_of(v), top + ph + 14, f"{v:.1f}", anchor="middle"))
    body.append(_text(left + pw / 2, height - 6, "pass rate (share of scored rollouts that passed)", anchor="middle"))
    return _svg(width, height, body, label)


def timing_strips(timings: Sequence[Timing], key: str, label: str, width: int = 760) -> str:
    """Per stage, its own seconds axis: every value as a tick, the p50-p90 span as a box,
    and n / p50 / p90 / max written beside it."""
    label_w, fits = _label_w([t.label for t in timings], width)

    def stats_of(t: Timing) -> tuple[tuple[str, str], ...]:
        top = t.quantile(1.0)
        return (("n", str(t.n)), ("p50", f"{t.quantile(0.5):.2f}"), ("p90", f"{t.quantile(0.9):.2f}"), ("max", f"{top:.2f}"))

    # What the widest stats line needs (as drawn: "n 24  p50 8.39  ... s"), the plot takes the rest.
    stats_w = max((_text_w("  ".join(f"{k} {v}" for k, v in stats_of(t)) + " s") for t in timings if t.n),
                  default=0.0)
    row_h, plot_w = 46, width - label_w - stats_w - 24
    body = []
    for i, t in enumerate(timings):
        y = 10 + i * row_h
        body.append(_label(label_w - 6, y + 16, t.label, fits))
        if not t.n:
            body.append(_text(label_w, y + 16, t.empty))
            continue
        top = t.quantile(1.0) or 1.0
        x_of = lambda v: label_w + plot_w * v / top  # noqa: E731
        p50, p90 = t.quantile(0.5), t.quantile(0.9)
        body.append(f'<line x1="{label_w}" y1="{y + 12}" x2="{label_w + plot_w}" y2="{y + 12}" stroke="#a0aec0"/>')
        body.append(_rect(x_of(p50), y + 4, x_of(p90) - x_of(p50), 16, "hatch-grey", f"{t.label}: p50-p90"))
        body += [f'<line x1="{x_of(v):.1f}" y1="{y + 2}" x2="{x_of(v):.1f}" y2="{y + 22}" stroke="#1a202c" '
                 f'stroke-width="1"/>' for v in t.values]
        body.append(f'<line x1="{x_of(p50):.1f}" y1="{y}" x2="{x_of(p50):.1f}" y2="{y + 24}" stroke="#1a202c" '
                    f'stroke-width="3"/>')
        body.append(_text(label_w, y + 36, "0 s"))
        body.append(_text(label_w + plot_w, y + 36, f"{top:.2f} s", anchor="end"))
        stats = stats_of(t)
        spans = "  ".join(f'<tspan class="stat">{name}</tspan> <tspan class="total" data-k="{key}.{t.stage}.{name}">'
                          f"{val}</tspan>" for name, val in stats)
        body.append(f'<text x="{label_w + plot_w + 14}" y="{y + 16}" xml:space="preserve">{spans} s</text>')
    return _svg(width, 10 + len(timings) * row_h, body, label)
