"""A small SVG line chart of loss curves: the live plot of `train(..., progress=True)` in a
notebook. Plain SVG text, so a notebook shows it without matplotlib or widgets."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from xml.sax.saxutils import escape

COLORS = ("#5aa9ff", "#ff9f43", "#5cc689", "#e86a92", "#b48cf2", "#f2d24e")  # theme.PLOT_COLORS
WIDTH, HEIGHT = 420.0, 220.0
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 56.0, 12.0, 26.0, 30.0
MAX_POINTS = 240  # per series: about one per two pixels, however long the run


def thinned(points: Sequence[tuple[float, float]], limit: int = MAX_POINTS
            ) -> Sequence[tuple[float, float]]:
    """At most `limit` of `points`, evenly spaced, the first and the last kept: the plot's
    size stays fixed as a run grows."""
    if len(points) <= limit:
        return points
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]


def loss_plot(series: Mapping[str, Sequence[tuple[float, float]]], title: str = "loss",
              x_label: str = "epoch") -> str:
    """An SVG chart of each named series of (x, y) points, one polyline each, with its
    name in the legend. Non-finite points are left out; a range spanning more than two
    decades is drawn on a log scale (losses fall by orders of magnitude), and its axis says
    so. A long series is thinned to `MAX_POINTS`."""
    # thinned first: a redraw costs the same at epoch 10 and at epoch 100,000
    clean = {name: [(float(x), float(y)) for x, y in thinned(list(pts))
                    if math.isfinite(x) and math.isfinite(y)]
             for name, pts in series.items()}
    points = [p for pts in clean.values() for p in pts]
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH:.0f}' "
             f"height='{HEIGHT:.0f}' font-family='DejaVu Sans, Verdana, sans-serif' "
             "font-size='11'>",
             f"<rect width='{WIDTH:.0f}' height='{HEIGHT:.0f}' fill='#ffffff' "
             "stroke='#d3d8de'/>",
             f"<text x='{PAD_LEFT}' y='16' font-weight='bold' fill='#1c2229'>"
             f"{escape(title)}</text>"]
    if not points:
        parts.append(f"<text x='{PAD_LEFT}' y='{HEIGHT / 2:.0f}' fill='#55606d'>"
                     "no numbers yet</text></svg>")
        return "".join(parts)
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    log = min(ys) > 0 and max(ys) / min(ys) > 100
    f = math.log10 if log else (lambda v: v)
    x0, x1 = min(xs), max(xs)
    y0, y1 = f(min(ys)), f(max(ys))
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        y0, y1 = y0 - (abs(y0) or 1) * 0.05, y1 + (abs(y1) or 1) * 0.05
    inner_w = WIDTH - PAD_LEFT - PAD_RIGHT
    inner_h = HEIGHT - PAD_TOP - PAD_BOTTOM

    def at(x: float, y: float) -> str:
        px = PAD_LEFT + (x - x0) / (x1 - x0) * inner_w
        py = PAD_TOP + (1 - (f(y) - y0) / (y1 - y0)) * inner_h
        return f"{px:.1f},{py:.1f}"

    bottom = PAD_TOP + inner_h
    parts.append(f"<path d='M{PAD_LEFT},{PAD_TOP} V{bottom} H{WIDTH - PAD_RIGHT}' "
                 "fill='none' stroke='#a9b2bd'/>")
    for value, y in ((max(ys), PAD_TOP + 4), (min(ys), bottom)):
        parts.append(f"<text x='{PAD_LEFT - 4}' y='{y:.1f}' text-anchor='end' "
                     f"fill='#55606d'>{value:.4g}</text>")
    parts.append(f"<text x='{PAD_LEFT}' y='{bottom + 14:.1f}' fill='#55606d'>{x0:g}</text>")
    parts.append(f"<text x='{WIDTH - PAD_RIGHT}' y='{bottom + 14:.1f}' text-anchor='end' "
                 f"fill='#55606d'>{x1:g}</text>")
    parts.append(f"<text x='{PAD_LEFT + inner_w / 2:.1f}' y='{bottom + 24:.1f}' "
                 f"text-anchor='middle' fill='#55606d'>{escape(x_label)}</text>")
    if log:  # the y axis is the logarithmic one: say so beside it
        mid = PAD_TOP + inner_h / 2
        parts.append(f"<text class='y-scale' x='14' y='{mid:.1f}' text-anchor='middle' "
                     f"transform='rotate(-90 14 {mid:.1f})' fill='#55606d'>log scale</text>")
    legend_x = WIDTH - PAD_RIGHT
    for i, (name, pts) in enumerate(clean.items()):
        color = COLORS[i % len(COLORS)]
        if len(pts) == 1:
            parts.append(f"<circle class='series' cx='{at(*pts[0]).split(',')[0]}' "
                         f"cy='{at(*pts[0]).split(',')[1]}' r='3' fill='{color}'/>")
        elif pts:
            parts.append(f"<polyline class='series' points='{' '.join(at(*p) for p in pts)}' "
                         f"fill='none' stroke='{color}' stroke-width='2'/>")
        parts.append(f"<text x='{legend_x:.1f}' y='16' text-anchor='end' fill='{color}'>"
                     f"{escape(name)}</text>")
        legend_x -= 7.0 * len(name) + 14
    parts.append("</svg>")
    return "".join(parts)
