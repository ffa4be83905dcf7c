"""Wire routes that go around cards instead of under them (Qt-free geometry).

A wire leaves an output to the right and enters an input from the left. The plain S-curve
is kept when it touches no card. Otherwise the route is orthogonal with rounded corners:
a Z (out, across at some free column, in) when the input lies ahead, or a detour along a
free lane (out, to the lane, back along it, down to the input) when the S-curve would cut
through cards or the input lies behind (a wrapped chain). Candidate columns and lanes are
the gaps beside the cards in the way; the shortest free one wins (each bend costs a little).
Rectangles are (left, top, right, bottom); points are (x, y).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

Point = tuple[float, float]
Rect = tuple[float, float, float, float]

STUB = 22.0  # how far a wire runs straight out of (into) its port before it turns
MARGIN = 10.0  # clearance kept from a card's edge
BEND = 40.0  # the cost of one bend, in scene units of length
SAMPLES = 24  # points tested along an S-curve


def s_curve(a: Point, b: Point) -> tuple[Point, Point, Point, Point]:
    """The control points of the plain wire from output `a` to input `b`."""
    dx = max(40.0, abs(b[0] - a[0]) * 0.5)
    return a, (a[0] + dx, a[1]), (b[0] - dx, b[1]), b


def curve_points(c: Sequence[Point], n: int = SAMPLES) -> list[Point]:
    """`n` + 1 points along the cubic bezier with control points `c`."""
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = c
    out = []
    for i in range(n + 1):
        t = i / n
        u = 1 - t
        a, b, cc, d = u * u * u, 3 * u * u * t, 3 * u * t * t, t * t * t
        out.append((a * x0 + b * x1 + cc * x2 + d * x3, a * y0 + b * y1 + cc * y2 + d * y3))
    return out


def _inside(p: Point, r: Rect) -> bool:
    return r[0] < p[0] < r[2] and r[1] < p[1] < r[3]


def _segment_hits(p: Point, q: Point, r: Rect) -> bool:
    """Does the axis-parallel segment p-q pass through the inside of `r`?"""
    if p[1] == q[1]:  # horizontal
        lo, hi = min(p[0], q[0]), max(p[0], q[0])
        return r[1] < p[1] < r[3] and lo < r[2] and hi > r[0]
    lo, hi = min(p[1], q[1]), max(p[1], q[1])
    return r[0] < p[0] < r[2] and lo < r[3] and hi > r[1]


def _free(points: list[Point], obstacles: list[Rect]) -> bool:
    """Is the polyline clear of every obstacle?"""
    return not any(_segment_hits(p, q, r) for p, q in pairwise(points)
                   for r in obstacles)


def _length(points: list[Point]) -> float:
    total = sum(abs(q[0] - p[0]) + abs(q[1] - p[1]) for p, q in pairwise(points))
    return total + BEND * (len(points) - 2)


def _simplify(points: list[Point]) -> list[Point]:
    """Drop repeated points and the middle of three points on one line."""
    out: list[Point] = []
    for p in points:
        if out and abs(p[0] - out[-1][0]) < 1e-6 and abs(p[1] - out[-1][1]) < 1e-6:
            continue
        if len(out) >= 2 and ((out[-2][0] == out[-1][0] == p[0])
                              or (out[-2][1] == out[-1][1] == p[1])):
            out[-1] = p
            continue
        out.append(p)
    return out


def route(a: Point, b: Point, cards: Sequence[Rect], source: Rect | None = None,
          target: Rect | None = None) -> list[Point] | None:
    """An orthogonal polyline from `a` to `b` around `cards`; None when the S-curve is clear.

    `cards` are the other cards near the wire; `source` and `target` are the cards it
    leaves and enters (its ports lie on their edges, so they are not grown).
    """
    grown = [(r[0] - MARGIN, r[1] - MARGIN, r[2] + MARGIN, r[3] + MARGIN) for r in cards]
    obstacles = [*grown, *(r for r in (source, target) if r is not None)]
    ahead = b[0] - a[0] > 2 * STUB
    if ahead:
        pts = curve_points(s_curve(a, b))
        if not any(_inside(p, r) for p in pts[1:-1] for r in grown):
            return None
    x1, x2 = a[0] + STUB, b[0] - STUB
    candidates: list[list[Point]] = []
    if ahead:  # a Z through a free column between the two ports
        columns = {(x1 + x2) / 2, x1, x2}
        for r in obstacles:
            for x in (r[0] - 1, r[2] + 1):
                if x1 <= x <= x2:
                    columns.add(x)
        candidates += [[a, (x, a[1]), (x, b[1]), b] for x in columns]
    lo, hi = min(x1, x2), max(x1, x2)
    lanes = {a[1], b[1], (a[1] + b[1]) / 2}
    for r in obstacles:
        if r[2] > lo - STUB and r[0] < hi + STUB:
            lanes.update((r[1] - 1, r[3] + 1))
    candidates += [[a, (x1, a[1]), (x1, y), (x2, y), (x2, b[1]), b] for y in lanes]
    for c in sorted((_simplify(c) for c in candidates), key=_length):
        if _free(c, obstacles):
            return c
    return _wide_detour(a, b, x1, x2, obstacles)


def _wide_detour(a: Point, b: Point, x1: float, x2: float, obstacles: list[Rect]
                 ) -> list[Point] | None:
    """When the ports' own columns are blocked (cards stacked right beside a port): turn
    at a column past the cards in the way, cross along a free lane, come down at a column
    before the input; the shortest free one, or None."""
    cols_a = sorted({x1, *(r[2] + 1 for r in obstacles if r[2] + 1 > x1)})[:8]
    cols_b = sorted({x2, *(r[0] - 1 for r in obstacles if r[0] - 1 < x2)}, reverse=True)[:8]
    lanes = {a[1], b[1], *(r[1] - 1 for r in obstacles), *(r[3] + 1 for r in obstacles)}
    candidates = [_simplify([a, (xa, a[1]), (xa, y), (xb, y), (xb, b[1]), b])
                  for xa in cols_a for xb in cols_b for y in lanes]
    for c in sorted(candidates, key=_length):
        if _free(c, obstacles):
            return c
    return None


def label_spot(points: list[Point], width: float, height: float, avoid: Sequence[Rect],
               dots: Sequence[Point]) -> Point | None:
    """The centre for a label of this size on the polyline `points` (or sampled curve), or
    just beside it, that overlaps no rectangle of `avoid` and no port dot; None when there
    is no such place (the wire is too short: its tooltip still tells the shape)."""
    total = [0.0]
    for p, q in pairwise(points):
        total.append(total[-1] + ((q[0] - p[0]) ** 2 + (q[1] - p[1]) ** 2) ** 0.5)
    length = total[-1]
    if length <= 0:
        return None

    def at(f: float) -> Point:
        d = f * length
        for i in range(len(points) - 1):
            if total[i + 1] >= d:
                p, q = points[i], points[i + 1]
                seg = total[i + 1] - total[i]
                t = (d - total[i]) / seg if seg else 0.0
                return (p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1]))
        return points[-1]

    for lift in (0.0, height / 2 + 3, -(height / 2 + 3)):  # on the wire, then beside it
        for f in (0.5, 0.4, 0.6, 0.3, 0.7, 0.25, 0.75, 0.2, 0.8):
            x, y = at(f)
            c = (x, y - lift)
            box = (c[0] - width / 2 - 2, c[1] - height / 2 - 2, c[0] + width / 2 + 2,
                   c[1] + height / 2 + 2)
            if any(_overlaps(box, r) for r in avoid):
                continue
            if any(box[0] - 7 < px < box[2] + 7 and box[1] - 7 < py < box[3] + 7
                   for px, py in dots):
                continue
            return c
    return None


def _overlaps(p: Rect, q: Rect) -> bool:
    return p[0] < q[2] and q[0] < p[2] and p[1] < q[3] and q[1] < p[3]
