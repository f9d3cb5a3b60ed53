"""Server-side SVG charts: small, accessible (title + description), no JavaScript needed."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape


@dataclass(frozen=True)
class Bar:
    label: str
    value: float


def bar_chart_svg(bars: list[Bar], *, title: str, x_label: str, y_label: str, width: int = 560, height: int = 220) -> str:
    """A vertical bar chart as an inline SVG string (values escaped; role=img with a text alternative)."""
    if not bars:
        return f'<p class="muted">{escape(title)}: no data.</p>'
    left, bottom, top, right = 48, 36, 16, 8
    plot_w, plot_h = width - left - right, height - top - bottom
    vmax = max(b.value for b in bars) or 1
    step = plot_w / len(bars)
    bar_w = max(step * 0.8, 1)
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="100%" role="img" aria-labelledby="t d">',
        f'<title id="t">{escape(title)}</title>',
        f'<desc id="d">{escape(", ".join(f"{b.label}: {b.value:g}" for b in bars[:50]))}</desc>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" class="axis"/>',
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end" class="tick">{vmax:g}</text>',
        f'<text x="{left - 6}" y="{top + plot_h}" text-anchor="end" class="tick">0</text>',
    ]
    label_every = max(1, -(-len(bars) // 8))  # at most 8 tick labels, so they never collide
    for i, b in enumerate(bars):
        h = plot_h * b.value / vmax
        x = left + i * step + (step - bar_w) / 2
        parts.append(
            f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}" class="bar-rect">'
            f"<title>{escape(b.label)}: {b.value:g}</title></rect>"
        )
        if i % label_every == 0:
            parts.append(f'<text x="{x + bar_w / 2:.1f}" y="{top + plot_h + 14}" text-anchor="middle" class="tick">{escape(b.label)}</text>')
    parts.append(f'<text x="{left + plot_w / 2}" y="{height - 4}" text-anchor="middle" class="axis-label">{escape(x_label)}</text>')
    parts.append(f'<text x="12" y="{top + plot_h / 2}" text-anchor="middle" class="axis-label" transform="rotate(-90 12 {top + plot_h / 2})">{escape(y_label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Series:
    name: str
    points: list[tuple[float, float]]
    css: str = "s1"


def line_chart_svg(series: list[Series], *, title: str, x_label: str, y_label: str,
                   width: int = 640, height: int = 240, y_min: float | None = 0.0, y_max: float | None = None,
                   dots: bool = False) -> str:
    """Lines over a shared x axis, with a legend; role=img and a text description of the ends. `dots` marks each
    point (a line of one point shows nothing else); `y_max` fixes the top (F1: 1)."""
    pts = [p for s in series for p in s.points]
    if not pts:
        return f'<p class="muted">{escape(title)}: no data.</p>'
    left, bottom, top, right = 56, 36, 24, 12
    pw, ph = width - left - right, height - top - bottom
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    x0 = 0 if x0 == x1 else x0  # one point: at its place on an axis from 0, not on the left edge
    y0 = y_min if y_min is not None else min(p[1] for p in pts)
    y1 = max(p[1] for p in pts) if y_max is None else y_max
    xs, ys = (x1 - x0) or 1, (y1 - y0) or 1

    def sx(x: float) -> float:
        return left + pw * (x - x0) / xs

    def sy(y: float) -> float:
        return top + ph - ph * (y - y0) / ys

    desc = "; ".join(f"{s.name}: {s.points[0][1]:.4g} at {x_label} {s.points[0][0]:g}, "
                     f"{s.points[-1][1]:.4g} at {s.points[-1][0]:g}" for s in series if s.points)
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="100%" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title><desc>{escape(desc)}</desc>",
        f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" class="axis"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" class="axis"/>',
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end" class="tick">{y1:.3g}</text>',
        f'<text x="{left - 6}" y="{top + ph}" text-anchor="end" class="tick">{y0:.3g}</text>',
        f'<text x="{left}" y="{top + ph + 14}" text-anchor="middle" class="tick">{x0:g}</text>',
        f'<text x="{left + pw}" y="{top + ph + 14}" text-anchor="end" class="tick">{x1:g}</text>',
        f'<text x="{left + pw / 2}" y="{height - 4}" text-anchor="middle" class="axis-label">{escape(x_label)}</text>',
        f'<text x="12" y="{top + ph / 2}" text-anchor="middle" class="axis-label" transform="rotate(-90 12 {top + ph / 2})">{escape(y_label)}</text>',
    ]
    for i, s in enumerate(series):
        path = " ".join(f"{'M' if j == 0 else 'L'}{sx(x):.1f},{sy(y):.1f}" for j, (x, y) in enumerate(s.points))
        parts.append(f'<path d="{path}" class="line {s.css}" fill="none"><title>{escape(s.name)}</title></path>')
        if dots:
            parts.extend(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" class="dot {s.css}">'
                         f'<title>{escape(s.name)}: {y:.3f} at {x:g} {escape(x_label)}</title></circle>' for x, y in s.points)
        lx = left + 8 + i * 150
        parts.append(f'<line x1="{lx}" y1="10" x2="{lx + 18}" y2="10" class="line {s.css}"/>'
                     f'<text x="{lx + 22}" y="14" class="tick">{escape(s.name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def heatmap_svg(matrix: list[list[float]], labels: list[str], *, title: str, link_prefix: str | None = None,
                cell: int = 9, vmax: float | None = None) -> str:
    """A square heatmap; each cell's <title> names both features and the value (hover, screen readers)."""
    n = len(matrix)
    if n == 0:
        return f'<p class="muted">{escape(title)}: no data.</p>'
    top = max((abs(v) for row in matrix for v in row), default=1.0) if vmax is None else vmax
    top = top or 1.0
    size = n * cell
    parts = [f'<svg class="heatmap" viewBox="0 0 {size} {size}" width="{min(size, 540)}" role="img" '
             f'aria-label="{escape(title)}"><title>{escape(title)}</title>']
    for i, row in enumerate(matrix):
        for j, v in enumerate(row):
            if v == 0:
                continue
            alpha = min(abs(v) / top, 1.0)
            hue = "47,91,211" if v >= 0 else "180,35,24"
            parts.append(f'<rect x="{j * cell}" y="{i * cell}" width="{cell}" height="{cell}" '
                         f'fill="rgba({hue},{alpha:.3f})"><title>{escape(labels[i])} → {escape(labels[j])}: {v:.3g}</title></rect>')
    parts.append("</svg>")
    return "".join(parts)
