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
    label_every = max(1, len(bars) // 12)
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
