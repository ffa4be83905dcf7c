"""Auto-layout by topological layers (Qt-free).

Each node goes in the column one past its deepest input, so data sits on the left and
optimizers on the right, and every wire runs left to right. Within a column, nodes are
ordered by the mean row of their inputs (the barycentre heuristic), which untangles most
crossings of the small graphs people draw by hand.
"""

from __future__ import annotations

from nodegraph.model.graph import Graph

COLUMN = 276.0  # node width plus room for a wire and its shape label
ROW = 150.0


def layers(graph: Graph) -> dict[str, int]:
    """Column of every node: 0 for nodes without inputs, else one past the deepest input."""
    try:
        order = graph.topological_order()
    except Exception:  # a cycle: fall back to file order, one column each side of the cycle
        order = list(graph.nodes)
    column: dict[str, int] = {}
    for node in order:
        column[node] = max((column.get(e.src, 0) + 1 for e in graph.edges_into(node)
                            if e.src in column), default=0)
    return column


def auto_layout(graph: Graph, heights: dict[str, float] | None = None) -> dict[str, tuple]:
    """Positions (x, y) for every node; `heights` spaces tall nodes further apart."""
    column = layers(graph)
    by_column: dict[int, list[str]] = {}
    for node, c in column.items():
        by_column.setdefault(c, []).append(node)
    row: dict[str, float] = {}
    positions: dict[str, tuple[float, float]] = {}
    for c in sorted(by_column):
        nodes = by_column[c]
        first = {n: float(i) for i, n in enumerate(nodes)}  # file order for nodes without inputs
        nodes.sort(key=lambda n: _barycentre(graph, n, row, first[n]))
        y = 0.0
        for i, n in enumerate(nodes):
            row[n] = float(i)
            positions[n] = (c * COLUMN, y)
            y += max(ROW, (heights or {}).get(n, 0.0) + 40.0)
    return _centre_columns(positions, by_column)


def _barycentre(graph: Graph, node: str, row: dict[str, float], default: float) -> float:
    rows = [row[e.src] for e in graph.edges_into(node) if e.src in row]
    return sum(rows) / len(rows) if rows else default


def _centre_columns(positions: dict[str, tuple], by_column: dict[int, list[str]]) -> dict:
    """Shift each column vertically so the columns share a centre line."""
    out = {}
    for nodes in by_column.values():
        ys = [positions[n][1] for n in nodes]
        shift = -(min(ys) + max(ys)) / 2
        for n in nodes:
            x, y = positions[n]
            out[n] = (x, round(y + shift))
    return out
