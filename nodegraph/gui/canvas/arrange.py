"""Arranging a selection of cards: align, distribute, straighten, snap to the grid.

Pure geometry over card rectangles (x, y, width, height) keyed by node id; each function
returns the new top-left corners of the cards it moves, which the caller applies as one
undoable move. Nothing here changes the model.
"""

from __future__ import annotations

Rect = tuple[float, float, float, float]


def align(rects: dict[str, Rect], edge: str) -> dict[str, tuple[float, float]]:
    """Line the cards up on one `edge`: left, right, top, bottom, hcenter or vcenter; cards
    that would then overlap are pushed apart along the line (in their old order), so an
    Align as Column on cards of one row makes a column, not a stack."""
    if len(rects) < 2:
        return {}
    placed = _aligned(rects, edge)
    axis = 1 if edge in ("left", "right", "hcenter") else 0
    return _apart(rects, placed, axis)


def _aligned(rects: dict[str, Rect], edge: str) -> dict[str, tuple[float, float]]:
    xs = {n: r[0] for n, r in rects.items()}
    ys = {n: r[1] for n, r in rects.items()}
    if edge == "left":
        v = min(xs.values())
        return {n: (v, ys[n]) for n in rects}
    if edge == "right":
        v = max(r[0] + r[2] for r in rects.values())
        return {n: (v - r[2], ys[n]) for n, r in rects.items()}
    if edge == "top":
        v = min(ys.values())
        return {n: (xs[n], v) for n in rects}
    if edge == "bottom":
        v = max(r[1] + r[3] for r in rects.values())
        return {n: (xs[n], v - r[3]) for n, r in rects.items()}
    if edge == "hcenter":  # one column: centres on one vertical line
        v = sum(r[0] + r[2] / 2 for r in rects.values()) / len(rects)
        return {n: (v - r[2] / 2, ys[n]) for n, r in rects.items()}
    if edge == "vcenter":  # one row: centres on one horizontal line
        v = sum(r[1] + r[3] / 2 for r in rects.values()) / len(rects)
        return {n: (xs[n], v - r[3] / 2) for n, r in rects.items()}
    raise ValueError(f"unknown edge {edge!r}")


APART = 24.0  # the gap left between cards that aligning pushed apart


def _apart(rects: dict[str, Rect], placed: dict[str, tuple[float, float]],
           axis: int) -> dict[str, tuple[float, float]]:
    """Push cards along `axis` (0: x, 1: y) until none overlaps the one before it, keeping
    their order along that axis (then across it); cards already apart do not move."""
    other = 1 - axis
    order = sorted(placed, key=lambda n: (placed[n][axis], rects[n][other], n))
    out, end = {}, None
    for n in order:
        at = list(placed[n])
        if end is not None and at[axis] < end + APART:
            at[axis] = end + APART
        out[n] = (at[0], at[1])
        end = at[axis] + rects[n][axis + 2]
    return out


def distribute(rects: dict[str, Rect], axis: str) -> dict[str, tuple[float, float]]:
    """Equal gaps between the cards along `axis` ("x" or "y"); the outermost stay put."""
    if len(rects) < 3:
        return {}
    i = 0 if axis == "x" else 1
    order = sorted(rects, key=lambda n: rects[n][i])
    first, last = rects[order[0]], rects[order[-1]]
    span = last[i] + last[i + 2] - first[i]
    gap = (span - sum(rects[n][i + 2] for n in order)) / (len(order) - 1)
    at, out = first[i], {}
    for n in order:
        r = rects[n]
        out[n] = (at, r[1]) if axis == "x" else (r[0], at)
        at += r[i + 2] + gap
    return out


def straighten(corners: dict[str, tuple[float, float]], wires: list[tuple],
               order: list[str]) -> dict[str, tuple[float, float]]:
    """Move cards up or down so the wires among them run level.

    `wires` holds (source node, source port y offset, target node, target port y offset):
    the port's height below its card's top. Cards are taken in `order` (the graph's
    topological order); each card whose input is fed by a card already placed moves so
    that input sits level with that output. The first wire into a card decides.
    """
    placed = dict(corners)
    for node in order:
        if node not in corners:
            continue
        for src, src_dy, dst, dst_dy in wires:
            if dst == node and src in placed and src != node:
                placed[node] = (placed[node][0], placed[src][1] + src_dy - dst_dy)
                break
    return {n: p for n, p in placed.items() if p != corners[n]}


def snap(corners: dict[str, tuple[float, float]], step: float
         ) -> dict[str, tuple[float, float]]:
    """The corners moved to the nearest grid point."""
    return {n: (round(x / step) * step, round(y / step) * step) for n, (x, y) in corners.items()}
