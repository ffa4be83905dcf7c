"""A graph drawn as SVG without Qt: what a Jupyter notebook shows for a `Graph`.

Half of the users never open the editor; in a notebook `Graph._repr_svg_` shows this
drawing. It looks like the editor's canvas — cards with the node id over the block type, a
header in the block family's colour, typed ports with their names on the card's sides,
wires as the editor's horizontal S-curves in the colour of their port type, the file's
backdrops and comments — but it is plain text built here, so the core stays free of Qt.
Cards sit where the file's `ui.positions` put them (the editor's top-left corners); a
graph without positions (built in code) is laid out in layers by `layered_positions`, a
small topological layout (the editor's grandalf layout lives in the GUI's dependencies).

The colours are copies of `nodegraph.gui.base.theme`'s (tests/test_svg.py checks they match).
"""

from __future__ import annotations

import colorsys
import math
import re
import textwrap
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from xml.sax.saxutils import escape, quoteattr

from nodegraph.model.errors import GraphError
from nodegraph.model.groupdefs import GroupRegistry
from nodegraph.model.spec import BlockSpec, Registry


# What a drawing reads of a graph, its nodes and its wires (`Graph`, `Node`, `Edge` are the
# ones): protocols, as graph.py imports this module for `Graph._repr_svg_` (no import circle).
class DrawnNode(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def type(self) -> str: ...


class DrawnEdge(Protocol):
    @property
    def src(self) -> str: ...
    @property
    def src_port(self) -> str: ...
    @property
    def dst(self) -> str: ...
    @property
    def dst_port(self) -> str: ...


class Drawable(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def registry(self) -> Registry | GroupRegistry: ...
    @property
    def ui(self) -> Mapping[str, Any]: ...
    @property
    def nodes(self) -> Mapping[str, DrawnNode]: ...
    @property
    def edges(self) -> Sequence[DrawnEdge]: ...
    def topological_order(self) -> list[str]: ...

# copies of nodegraph.gui.base.theme (that module imports Qt)
THEMES = {
    "dark": {"CANVAS": "#1b1e23", "NODE_BODY": "#2a2f37", "NODE_BORDER": "#414854",
             "TEXT": "#e6e9ee",
             "TEXT_DIM": "#a3acb8", "HEADER_TEXT": "#f4f6f9", "HEADER_DIM": "#c9d1db",
             "ERROR": "#ff6b6b"},
    "light": {"CANVAS": "#f3f4f6", "NODE_BODY": "#ffffff", "NODE_BORDER": "#a9b2bd",
              "TEXT": "#1c2229",
              "TEXT_DIM": "#55606d", "HEADER_TEXT": "#ffffff", "HEADER_DIM": "#e8edf3",
              "ERROR": "#cf3030"},
}
CATEGORY_COLORS = {
    "data": "#3f9e6e", "layers": "#3f7fc0", "activations": "#2f9c98", "losses": "#c5493f",
    "optimizers": "#c9812e", "metrics": "#8e68c2", "schedules": "#a9609f",
}
SPARE_COLORS = ("#5f8f3e", "#b0704a", "#4a7fa0", "#9a5a8a", "#6a6fb8", "#3e9a8a")
UNKNOWN_COLOR = "#6b7380"  # a block type the registry does not know (theme.DISABLED)
WIRE_COLOR = "#4f9dde"  # a wire from a port the registry does not know (a tensor's colour)
COMMENT_COLOR = "#c9b458"  # nodegraph.gui.document.annotations: a note without a colour of its own
BACKDROP_COLOR = "#3f6f9e"
NOTE_TITLE = 28.0  # a backdrop's title bar
HEX = re.compile(r"^#[0-9A-Fa-f]{6}$")

NODE_WIDTH = 176.0
HEADER_HEIGHT = 40.0
PORT_ROW = 20.0
PORT_RADIUS = 5.5
RANK_GAP = 110.0  # between layers of the fallback layout, as the editor's layout
LANE_GAP = 36.0
ASPECT = 1.6  # width / height the fallback layout aims at
MIN_BAND = 3  # never cut into bands thinner than this many layers
MARGIN = 24.0
FONT = "DejaVu Sans, Verdana, Arial, sans-serif"


def category_color(category: str) -> str:
    """The header colour of a block family, as the editor picks it (a stable spare colour
    for families without one)."""
    return CATEGORY_COLORS.get(category) or SPARE_COLORS[zlib.crc32(category.encode())
                                                         % len(SPARE_COLORS)]


def darker(hex_color: str, factor: float = 1.35) -> str:
    """QColor.darker(135): the HSV value divided by `factor` (the card's title bar)."""
    r, g, b = (int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5))
    h, s, v = colorsys.rgb_to_hsv(r, g, b)
    r, g, b = colorsys.hsv_to_rgb(h, s, v / factor)
    return "#" + "".join(f"{round(c * 255):02x}" for c in (r, g, b))


@dataclass
class Card:
    """One node as drawn: where, what it says, its ports top to bottom."""

    id: str
    type: str
    x: float
    y: float
    inputs: list[tuple[str, str]]  # (port name, colour)
    outputs: list[tuple[str, str]]
    color: str
    known: bool

    @property
    def height(self) -> float:
        return HEADER_HEIGHT + max(len(self.inputs), len(self.outputs), 1) * PORT_ROW + 8

    def port_at(self, name: str, output: bool) -> tuple[float, float]:
        """The centre of a port's dot (the editor's `NodeItem.port_y`)."""
        ports = self.outputs if output else self.inputs
        row = next((i for i, (n, _) in enumerate(ports) if n == name), 0)
        return (self.x + (NODE_WIDTH if output else 0.0),
                self.y + HEADER_HEIGHT + (row + 0.5) * PORT_ROW + 2)


def graph_svg(graph: Drawable, theme: str = "dark", max_width: float | None = None) -> str:
    """The graph as an SVG document. `theme` is "dark" (the editor's default) or "light";
    `max_width` scales a wide drawing down to that many pixels (the viewBox keeps every
    card)."""
    if theme not in THEMES:
        raise ValueError(f"unknown theme {theme!r}: use one of {', '.join(THEMES)}")
    colors = THEMES[theme]
    cards = _cards(graph)
    if not cards:
        return _document(["<text x='24' y='36' fill=" + quoteattr(colors["TEXT_DIM"])
                          + f" font-family='{FONT}' font-size='13'>"
                          + escape(f"{graph.name}: an empty graph") + "</text>"],
                         (0, 0, 260, 60), colors, max_width)
    notes = _notes(graph)
    boxes = [(c.x, c.y, NODE_WIDTH, c.height) for c in cards.values()]
    boxes += [tuple(n["rect"]) for n in notes]
    left = min(x for x, _, _, _ in boxes) - MARGIN
    top = min(y for _, y, _, _ in boxes) - MARGIN
    right = max(x + w for x, _, w, _ in boxes) + MARGIN
    bottom = max(y + h for _, y, _, h in boxes) + MARGIN
    parts = [_backdrop(n, colors) for n in notes if n["kind"] == "backdrop"]
    parts.append("<g class='wires' fill='none' stroke-width='2'>")
    for e in graph.edges:
        if e.src in cards and e.dst in cards:
            a = cards[e.src].port_at(e.src_port, output=True)
            b = cards[e.dst].port_at(e.dst_port, output=False)
            color = next((c for n, c in cards[e.src].outputs if n == e.src_port), WIRE_COLOR)
            parts.append(f"<path class='wire' d='{_bezier(a, b)}' stroke='{color}'>"
                         f"<title>{escape(str(e))}</title></path>")
    parts.append("</g>")
    parts += [_card(c, colors) for c in cards.values()]
    parts += [_comment(n, colors) for n in notes if n["kind"] == "comment"]
    return _document(parts, (left, top, right - left, bottom - top), colors, max_width)


def _document(parts: list[str], box: tuple[float, float, float, float],
              colors: dict[str, str], max_width: float | None) -> str:
    x, y, w, h = box
    scale = min(1.0, max_width / w) if max_width else 1.0
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{w * scale:.0f}' "
            f"height='{h * scale:.0f}' viewBox='{x:.1f} {y:.1f} {w:.1f} {h:.1f}'>"
            f"<rect x='{x:.1f}' y='{y:.1f}' width='{w:.1f}' height='{h:.1f}' "
            f"fill='{colors['CANVAS']}'/>" + "".join(parts) + "</svg>")


def _bezier(a: tuple[float, float], b: tuple[float, float]) -> str:
    """The editor's wire (`wire_item.bezier`): a horizontal S-curve from output to input."""
    dx = max(40.0, abs(b[0] - a[0]) * 0.5)
    return (f"M{a[0]:.1f},{a[1]:.1f} C{a[0] + dx:.1f},{a[1]:.1f} "
            f"{b[0] - dx:.1f},{b[1]:.1f} {b[0]:.1f},{b[1]:.1f}")


def _card(c: Card, colors: dict[str, str]) -> str:
    header = c.color
    bar = darker(header)
    w, h = NODE_WIDTH, c.height
    kind = c.type if c.known else f"{c.type} (unknown)"
    # data-node, not id: a notebook inlines every drawing into one page, where ids must differ
    out = [f"<g class='card' data-node={quoteattr(c.id)} "
           f"transform='translate({c.x:.1f},{c.y:.1f})' font-family='{FONT}'>",
           f"<title>{escape(c.id)}: {escape(kind)}</title>",
           f"<rect width='{w}' height='{h:.1f}' rx='6' fill='{colors['NODE_BODY']}'/>",
           # the title bar: rounded on top, square where it meets the body
           f"<path d='M0,{HEADER_HEIGHT} V6 Q0,0 6,0 H{w - 6} Q{w},0 {w},6 "
           f"V{HEADER_HEIGHT} Z' fill='{bar}'/>",
           f"<rect y='{HEADER_HEIGHT - 2}' width='{w}' height='2' fill='{header}'/>",
           f"<text class='title' x='10' y='18' font-size='12.5' font-weight='bold' "
           f"fill='{colors['HEADER_TEXT']}'>{escape(_elide(c.id, w - 20, 7.6))}</text>",
           f"<text class='type' x='10' y='33' font-size='10' "
           f"fill='{colors['HEADER_DIM']}'>{escape(_elide(kind, w - 20, 6.0))}</text>"]
    half = w / 2 - 14
    for ports, output in ((c.inputs, False), (c.outputs, True)):
        for row, (name, color) in enumerate(ports):
            y = HEADER_HEIGHT + (row + 0.5) * PORT_ROW + 2
            x = w if output else 0.0
            anchor, tx = ("end", w - 12) if output else ("start", 12.0)
            out.append(f"<circle class='port' cx='{x}' cy='{y}' r='{PORT_RADIUS}' "
                       f"fill='{color}' stroke='{colors['CANVAS']}' stroke-width='1'/>")
            out.append(f"<text x='{tx}' y='{y + 3.5}' font-size='10' text-anchor='{anchor}' "
                       f"fill='{colors['TEXT_DIM']}'>{escape(_elide(name, half, 6.0))}</text>")
    out.append(f"<rect width='{w}' height='{h:.1f}' rx='6' fill='none' "
               f"stroke='{colors['NODE_BORDER']}' stroke-width='1'/>")
    out.append("</g>")
    return "".join(out)


def _notes(graph: Drawable) -> list[dict[str, Any]]:
    """The well-formed comments and backdrops of `ui.comments` (the editor's
    `annotations.is_note`; others are left out, as the editor leaves them out)."""
    found = graph.ui.get("comments") if isinstance(graph.ui, dict) else None
    out = []
    for note in found if isinstance(found, list) else []:
        rect = note.get("rect") if isinstance(note, dict) else None
        if (isinstance(note, dict) and note.get("kind") in ("comment", "backdrop")
                and isinstance(rect, list) and len(rect) == 4
                and all(isinstance(v, int | float) and not isinstance(v, bool) for v in rect)):
            color = note.get("color")
            ok = isinstance(color, str) and HEX.match(color) is not None
            out.append({**note, "color": color if ok else (
                COMMENT_COLOR if note["kind"] == "comment" else BACKDROP_COLOR)})
    return out


def _backdrop(note: dict[str, Any], colors: dict[str, str]) -> str:
    """A titled, tinted rectangle behind cards (the editor's `_paint_backdrop`)."""
    x, y, w, h = note["rect"]
    color, title = note["color"], str(note.get("text", ""))
    return (f"<g class='backdrop' transform='translate({x:.1f},{y:.1f})' font-family='{FONT}'>"
            f"<rect width='{w:.1f}' height='{h:.1f}' rx='8' fill='{color}' "
            f"fill-opacity='{48 / 255:.3f}'/>"
            f"<path d='M0,{NOTE_TITLE} V8 Q0,0 8,0 H{w - 8:.1f} Q{w:.1f},0 {w:.1f},8 "
            f"V{NOTE_TITLE} Z' fill='{color}' fill-opacity='{200 / 255:.3f}'/>"
            f"<text x='8' y='{NOTE_TITLE / 2 + 5:.1f}' font-size='14.5' font-weight='bold' "
            f"fill='{colors['TEXT']}'>{escape(_elide(title, w - 16, 8.8))}</text></g>")


def _comment(note: dict[str, Any], colors: dict[str, str]) -> str:
    """A text note over the canvas, its words wrapped to its width (`_paint_comment`)."""
    x, y, w, h = note["rect"]
    color = note["color"]
    room = max(int((w - 28) // 6.9), 4)
    lines = [part for para in str(note.get("text", "")).splitlines()
             for part in (textwrap.wrap(para, room) or [""])]
    lines = lines[:max(int((h - 16) // 16), 1)]
    # a text element per line: SVG Tiny renderers (Qt's) place no tspan by x and dy
    text = "".join(f"<text x='14' y='{22 + 16 * i}' font-size='12.5' "
                   f"fill='{colors['TEXT']}'>{escape(line)}</text>"
                   for i, line in enumerate(lines))
    return (f"<g class='comment' transform='translate({x:.1f},{y:.1f})' font-family='{FONT}'>"
            f"<rect width='{w:.1f}' height='{h:.1f}' rx='4' fill='{darker(color, 3.3)}' "
            f"fill-opacity='{235 / 255:.3f}' stroke='{darker(color, 1.6)}'/>"
            f"<rect width='4' height='{h:.1f}' fill='{color}'/>"
            f"{text}</g>")


def _elide(text: str, width: float, char_width: float) -> str:
    """`text` cut with an ellipsis to about `width` pixels (no font metrics without Qt:
    `char_width` is the font's mean advance)."""
    room = max(int(width // char_width), 2)
    return text if len(text) <= room else text[:room - 1] + "…"


def _cards(graph: Drawable) -> dict[str, Card]:
    """Every node's card, placed by the file's positions or, lacking those, by layers."""
    registry = graph.registry
    # ports an unknown block's wires name still get a dot, so its wires have an end
    named_in: dict[str, list[str]] = {}
    named_out: dict[str, list[str]] = {}
    for e in graph.edges:
        named_out.setdefault(e.src, []).append(e.src_port)
        named_in.setdefault(e.dst, []).append(e.dst_port)
    cards: dict[str, Card] = {}
    for n in graph.nodes.values():
        spec: BlockSpec | None = registry.get(n.type) if n.type in registry else None
        if spec is not None:
            inputs = [(p.name, p.type.color) for p in spec.inputs]
            outputs = [(p.name, p.type.color) for p in spec.outputs]
            color = category_color(spec.category)
        else:
            inputs = [(p, UNKNOWN_COLOR) for p in dict.fromkeys(named_in.get(n.id, []))]
            outputs = [(p, UNKNOWN_COLOR) for p in dict.fromkeys(named_out.get(n.id, []))]
            color = UNKNOWN_COLOR
        cards[n.id] = Card(n.id, n.type, 0.0, 0.0, inputs, outputs, color, spec is not None)
    placed = _file_positions(graph)
    missing = [nid for nid in cards if nid not in placed]
    if missing:
        heights = {nid: cards[nid].height for nid in missing}
        laid = layered_positions(graph, missing, heights)
        if placed:  # the unplaced ones go under the placed ones, left-aligned
            x0 = min(x for x, _ in placed.values())
            y0 = max(y + cards[nid].height for nid, (_, y) in placed.items()) + RANK_GAP
            laid = {n: (x + x0, y + y0) for n, (x, y) in laid.items()}
        placed.update(laid)
    for nid, (x, y) in placed.items():
        cards[nid].x, cards[nid].y = x, y
    return cards


def _file_positions(graph: Drawable) -> dict[str, tuple[float, float]]:
    """The cards' top-left corners the file gives, the well-formed ones only."""
    raw: Any = graph.ui.get("positions") if isinstance(graph.ui, dict) else None
    out = {}
    if isinstance(raw, dict):
        for n, p in raw.items():
            if (n in graph.nodes and isinstance(p, list | tuple) and len(p) == 2
                    and all(isinstance(v, int | float) and not isinstance(v, bool) for v in p)):
                out[n] = (float(p[0]), float(p[1]))
    return out


def layered_positions(graph: Drawable, nodes: list[str], heights: dict[str, float]
                      ) -> dict[str, tuple[float, float]]:
    """Top-left corners for `nodes`, left to right by layer: each node one layer after the
    furthest of its inputs (a longest-path layering; nodes of a cycle keep their order),
    each layer ordered by where its inputs sit (the barycentre heuristic), so most wires
    run forwards and few cross."""
    chosen = set(nodes)
    preds: dict[str, list[str]] = {n: [] for n in nodes}
    for e in graph.edges:
        if e.src in chosen and e.dst in chosen and e.src != e.dst:
            preds[e.dst].append(e.src)
    layer: dict[str, int] = {}
    for n in _order(graph, nodes):
        layer[n] = 1 + max((layer[p] for p in preds[n] if p in layer), default=-1)
    columns: dict[int, list[str]] = {}
    for n in nodes:
        columns.setdefault(layer[n], []).append(n)
    out: dict[str, tuple[float, float]] = {}
    slot: dict[str, float] = {}
    depth = {}
    for k in sorted(columns):
        col = columns[k]
        col.sort(key=lambda n: (sum(slot[p] for p in preds[n] if p in slot)
                                / max(1, sum(p in slot for p in preds[n]))
                                if any(p in slot for p in preds[n]) else float("inf")))
        y = 0.0
        for i, n in enumerate(col):
            out[n] = (k * (NODE_WIDTH + RANK_GAP), y)
            slot[n] = float(i)
            y += heights[n] + LANE_GAP
        depth[k] = y
    return _wrap(out, layer, depth)


def _wrap(out: dict[str, tuple[float, float]], layer: dict[str, int], depth: dict[int, float]
          ) -> dict[str, tuple[float, float]]:
    """A long chain of layers cut into bands stacked under each other, as many as bring the
    drawing closest to a 1.6 : 1 page (one endless row is unreadable in a notebook)."""
    layers = max(depth) + 1 if depth else 0
    tall = max(depth.values(), default=0.0) + RANK_GAP - LANE_GAP
    step = NODE_WIDTH + RANK_GAP

    def misfit(bands: int) -> float:
        per = -(-layers // bands)
        return abs(math.log((per * step) / (bands * tall) / ASPECT))

    bands = min(range(1, max(1, layers // MIN_BAND) + 1), key=misfit)
    if bands == 1:
        return out
    per = -(-layers // bands)
    return {n: ((layer[n] % per) * step, y + (layer[n] // per) * tall)
            for n, (x, y) in out.items()}


def _order(graph: Drawable, nodes: list[str]) -> list[str]:
    """`nodes` inputs first; the graph's order where a cycle leaves no topological one."""
    try:
        order = graph.topological_order()
    except GraphError:  # a cycle: the validator reports it; the drawing still shows it
        return list(nodes)
    chosen = set(nodes)
    return [n for n in order if n in chosen]
