"""Auto-layout: a layered (Sugiyama) drawing from grandalf, wrapped to fit a screen (Qt-free).

grandalf ranks the nodes so every wire runs one way (data first, optimizers last), puts a
dummy vertex on every layer a long wire crosses (so `data.y -> loss` gets its own lane
instead of running under the cards between) and orders each layer to cut crossings. The
result is drawn left to right ("LR", the default) or top to bottom ("TB"). A network
deeper than it is wide would become one endless row, so the layers are cut into bands
stacked under each other (beside each other for "TB"), as many as make the whole graph
fit a screen of the given aspect at the largest zoom. Unconnected pieces (a procedure
node, a second small network) are packed in rows under the biggest one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from grandalf.graphs import Edge as GEdge
from grandalf.graphs import Vertex, graph_core
from grandalf.layouts import SugiyamaLayout

from nodegraph.model.graph import Graph

DIRECTIONS = ("LR", "TB")
DIRECTION_KEY = "layout_direction"  # in the file's `ui` section: the user's last choice
CARD_WIDTH = 176.0  # theme.NODE_WIDTH, repeated here so this module needs no Qt
RANK_GAP = {"LR": 110.0, "TB": 80.0}  # between layers: room for a wire and its shape label
LANE_GAP = {"LR": 36.0, "TB": 60.0}  # between cards of one layer
BAND_GAP = 90.0  # between the bands of a wrapped network: the lane of the wrapping wires
PIECE_GAP = 80.0  # between unconnected pieces
SCREEN_ASPECT = 1.6  # width / height of the canvas the layout should fill
MIN_BAND = 3  # never cut a network into bands thinner than this many layers
MAX_BANDS = 60  # a 2,000-layer chain still fits a screen in 60 bands
WRAP_COST = 0.8  # wrapping must buy more than 1 / WRAP_COST of zoom


def saved_direction(ui: Mapping) -> str:
    """The layout direction a file was last laid out in ("LR" for a file without one)."""
    value = ui.get(DIRECTION_KEY)
    return value if value in DIRECTIONS else "LR"


def card_sizes(graph: Graph) -> dict[str, tuple[float, float]]:
    """(width, height) of each node's card, from its block's port counts: the editor's
    `node_item.card_height` (40 px title bar, 20 px a port row, 8 px below), kept in step."""
    out = {}
    for n, node in graph.nodes.items():
        spec = graph.registry.get(node.type) if node.type in graph.registry else None
        rows = max(len(spec.inputs), len(spec.outputs), 1) if spec else 1
        out[n] = (CARD_WIDTH, 40.0 + rows * 20.0 + 8.0)
    return out


class _Layers(list):
    """grandalf's list of layers, found by identity: the library looks every layer up with
    `list.index`, which compares layers element by element (quadratic: seconds for a
    thousand-layer network)."""

    _at: dict[int, int] | None = None
    _built_for = -1

    def index(self, layer, *_):
        if self._built_for != len(self):  # layers are only appended, before any lookup
            self._at = {id(item): i for i, item in enumerate(self)}
            self._built_for = len(self)
        assert self._at is not None  # built above: len(self) is never -1
        try:
            return self._at[id(layer)]
        except KeyError:
            raise ValueError("not a layer of this layout") from None


class _View:
    """What grandalf reads and writes on a vertex: its size and, after drawing, its centre."""

    def __init__(self, w: float, h: float):
        self.w, self.h = w, h
        self.xy = (0.0, 0.0)


def auto_layout(graph: Graph, heights: dict[str, float] | None = None, direction: str = "LR",
                aspect: float = SCREEN_ASPECT, widths: dict[str, float] | None = None
                ) -> dict[str, tuple[float, float]]:
    """Top-left positions (x, y) for every node of `graph`.

    `heights` and `widths` are the cards' sizes (a default card where missing); `direction`
    is "LR" or "TB"; `aspect` is the width / height of the screen to fill.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"layout direction must be one of {DIRECTIONS}, not {direction!r}")
    if not graph.nodes:
        return {}
    default = card_sizes(graph)
    size = {n: ((widths or {}).get(n, default[n][0]), (heights or {}).get(n, default[n][1]))
            for n in graph.nodes}
    try:
        graph.topological_order()
        acyclic = True
    except Exception:  # a file with a cycle (validation names it): grandalf turns wires round
        acyclic = False
    pieces = [_layered(piece, size, direction, aspect, acyclic)
              for piece in _pieces(graph, size)]
    pieces.sort(key=lambda p: (-len(p[0]), min(p[0])))
    return {n: (round(x), round(y)) for n, (x, y) in _pack(pieces, aspect).items()}


def _pieces(graph: Graph, size: dict) -> list[tuple[list[Vertex], graph_core]]:
    """The connected components of `graph` as grandalf graphs, in file order.

    Each is grown edge by edge from its first vertex (grandalf's own `Graph` finds the
    components in quadratic time: seconds for a thousand nodes)."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    vertex = {}
    for n in graph.nodes:
        v = Vertex(n)
        v.view = _View(*size[n])
        vertex[n] = v
    links: dict[str, list[tuple[str, str]]] = {n: [] for n in graph.nodes}
    pairs = set()
    for e in graph.edges:  # two wires between the same nodes are one edge to the layout
        if e.src != e.dst and e.src in vertex and e.dst in vertex \
                and (e.src, e.dst) not in pairs:
            pairs.add((e.src, e.dst))
            links[e.src].append((e.src, e.dst))
            links[e.dst].append((e.src, e.dst))
    seen: set[str] = set()
    out = []
    for first in graph.nodes:
        if first in seen:
            continue
        core = graph_core([vertex[first]])
        seen.add(first)
        todo, members = [first], [first]
        while todo:  # breadth first: every edge added touches a vertex already in
            n = todo.pop()
            for src, dst in links[n]:
                other = dst if src == n else src
                if (src, dst) in pairs:
                    pairs.discard((src, dst))
                    core.add_edge(GEdge(vertex[src], vertex[dst]))
                if other not in seen:
                    seen.add(other)
                    members.append(other)
                    todo.append(other)
        members.sort(key=order.__getitem__)
        out.append(([vertex[n] for n in members], core))
    return out


def _layered(piece: tuple[list[Vertex], graph_core], size: dict, direction: str,
             aspect: float, acyclic: bool = True
             ) -> tuple[dict[str, tuple[float, float]], float, float]:
    """Positions of one connected piece (top-left at 0, 0), its width and its height."""
    vertices, core = piece
    lr = direction == "LR"
    for v in vertices:  # grandalf stacks layers downwards: for LR, draw it transposed
        w, h = size[v.data]
        v.view = _View(h, w) if lr else _View(w, h)
    if len(vertices) == 1:
        w, h = size[vertices[0].data]
        return {vertices[0].data: (0.0, 0.0)}, w, h
    sug = SugiyamaLayout(core)
    sug.layers = _Layers()
    sug.xspace, sug.yspace = LANE_GAP[direction], RANK_GAP[direction]
    roots = [v for v in vertices if not v.e_in()]
    # a network has no cycle: no wire to turn round (grandalf would search for them)
    sug.init_all(roots=roots or [vertices[0]], inverted_edges=[] if acyclic else None)
    sug.draw(3)
    rank = {v.data: sug.grx[v].rank for v in vertices}
    # (lane, depth): lane runs across the layers, depth along them; both are centres
    centre = {v.data: v.view.xy for v in vertices}
    layers = len(sug.layers)
    depth_of = [math.inf] * layers
    for n, r in rank.items():
        depth_of[r] = min(depth_of[r], centre[n][1] - _along(size[n], lr) / 2)
    for r in range(1, layers):  # a layer of dummies only: no card sets its depth
        if depth_of[r] == math.inf:
            depth_of[r] = depth_of[r - 1]
    band = _best_band(layers, depth_of, centre, rank, size, lr, aspect)
    return _wrap(centre, rank, size, lr, band, depth_of)


def _along(size: tuple[float, float], lr: bool) -> float:
    """A card's extent along the direction of flow."""
    return size[0] if lr else size[1]


def _across(size: tuple[float, float], lr: bool) -> float:
    return size[1] if lr else size[0]


def _wrap(centre: dict, rank: dict, size: dict, lr: bool, band: int, depth_of: list[float]
          ) -> tuple[dict[str, tuple[float, float]], float, float]:
    """Cut the layers into bands of `band` layers; lay the bands side by side across the flow.

    Returns top-left positions in screen axes, the total width and the total height.
    """
    groups: dict[int, list[str]] = {}
    for n, r in rank.items():
        groups.setdefault(r // band, []).append(n)
    out: dict[str, tuple[float, float]] = {}
    offset, extent_along = 0.0, 0.0
    for b in sorted(groups):
        nodes = groups[b]
        lane_lo = min(centre[n][0] - _across(size[n], lr) / 2 for n in nodes)
        lane_hi = max(centre[n][0] + _across(size[n], lr) / 2 for n in nodes)
        start = depth_of[b * band]
        for n in nodes:
            lane = centre[n][0] - _across(size[n], lr) / 2 - lane_lo + offset
            depth = centre[n][1] - _along(size[n], lr) / 2 - start
            extent_along = max(extent_along, depth + _along(size[n], lr))
            out[n] = (depth, lane) if lr else (lane, depth)
        offset += lane_hi - lane_lo + BAND_GAP
    extent_across = offset - BAND_GAP
    return (out, extent_along, extent_across) if lr else (out, extent_across, extent_along)


def _best_band(layers: int, depth_of: list[float], centre: dict, rank: dict, size: dict,
               lr: bool, aspect: float) -> int:
    """How many layers per band let the piece fill a screen of `aspect` at the largest zoom
    (trying up to MAX_BANDS bands, each from per-layer extents: no layout is redone)."""
    if layers <= MIN_BAND * 2:
        return layers
    lo, hi = [math.inf] * layers, [-math.inf] * layers  # across the flow, per layer
    end = [-math.inf] * layers  # along the flow: where the layer's deepest card ends
    for n, r in rank.items():
        half = _across(size[n], lr) / 2
        lo[r] = min(lo[r], centre[n][0] - half)
        hi[r] = max(hi[r], centre[n][0] + half)
        end[r] = max(end[r], centre[n][1] + _along(size[n], lr) / 2)
    best, best_score = layers, -math.inf
    for bands in range(1, min(MAX_BANDS, layers // MIN_BAND) + 1):
        band = math.ceil(layers / bands)
        across, along = -BAND_GAP, 0.0
        for start in range(0, layers, band):
            stop = min(layers, start + band)
            across += max(hi[start:stop]) - min(lo[start:stop]) + BAND_GAP
            along = max(along, max(end[start:stop]) - depth_of[start])
        w, h = (along, across) if lr else (across, along)
        zoom = min(aspect / w, 1.0 / h)  # the fitted zoom of a screen 1 unit high
        # the eye must jump back at a wrap: wrapping must buy a real gain
        score = zoom * (WRAP_COST if bands > 1 else 1.0) * 0.99 ** bands
        if score > best_score:
            best, best_score = band, score
    return best


def _pack(pieces: list[tuple[dict, float, float]], aspect: float) -> dict:
    """Place the pieces in rows (biggest first), each row as wide as the widest piece."""
    if not pieces:
        return {}
    area = sum(w * h for _, w, h in pieces)
    limit = max(max(w for _, w, _ in pieces), math.sqrt(area * aspect))
    out, x, y, row_h = {}, 0.0, 0.0, 0.0
    for positions, w, h in pieces:
        if x > 0 and x + w > limit:
            x, y, row_h = 0.0, y + row_h + PIECE_GAP, 0.0
        for n, (px, py) in positions.items():
            out[n] = (x + px, y + py)
        x += w + PIECE_GAP
        row_h = max(row_h, h)
    return out
