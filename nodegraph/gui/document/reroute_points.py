"""Where a wire's reroute points are kept: the file's `ui` section, under "reroutes",
keyed by the wire. Qt-free, so the clipboard and scripts read them without a display
(`nodegraph.gui.canvas.reroute` draws and edits them).
"""

from __future__ import annotations

from collections.abc import Mapping

from nodegraph.model.graph import Edge

KEY = "reroutes"


def edge_key(edge: Edge) -> str:
    return f"{edge.src}.{edge.src_port}->{edge.dst}.{edge.dst_port}"


def stored(ui: Mapping, edge: Edge) -> list[tuple[float, float]]:
    """The reroute points of `edge` in a graph's ui section (malformed entries skipped)."""
    table = ui.get(KEY)
    entry = table.get(edge_key(edge)) if isinstance(table, dict) else None
    if not isinstance(entry, list):
        return []
    return [(float(p[0]), float(p[1])) for p in entry if isinstance(p, list | tuple)
            and len(p) == 2 and all(isinstance(v, int | float) for v in p)]
