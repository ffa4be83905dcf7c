"""Copy and paste as JSON, so a selection travels between windows through the clipboard.

The clip is a small document in the graph file's own vocabulary: the copied nodes with
their types, params and positions, and the wires among them with their reroute points
(wires to nodes left behind are not copied), and the definitions of the groups they are
instances of. Pasting gives every node a fresh id where its old one is taken and shifts the
positions (and the points), so pasting twice never stacks nodes on top of each other; a
group definition comes along unless the graph has the same one, and takes a fresh name when
the graph has another of its name.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from nodegraph.gui.document import annotations as canvas_notes  # `annotations` is __future__'s
from nodegraph.gui.document import reroute_points as reroute
from nodegraph.gui.document.wiring import edges_among
from nodegraph.model.fileformat import group_entry
from nodegraph.model.graph import Edge, Graph, Node
from nodegraph.model.groupdefs import GROUP_NAME, PREFIX

FORMAT = "nodegraph-clip"  # the clip travels as text; this marks it as ours


def copy_nodes(graph: Graph, node_ids: Iterable[str], note_ids: Iterable[str] = ()) -> str:
    """The clip text for `node_ids` (in graph order) and comments / backdrops `note_ids`."""
    ids = [n for n in graph.nodes if n in set(node_ids)]
    wanted = set(note_ids)
    positions = graph.ui.get("positions", {})
    edges = edges_among(graph, ids)
    bends = {reroute.edge_key(e): [list(p) for p in reroute.stored(graph.ui, e)]
             for e in edges}
    doc = {"format": FORMAT, "version": 1,
           "nodes": {n: {"type": graph.nodes[n].type,
                         "params": copy.deepcopy(graph.nodes[n].params),
                         **copy.deepcopy(graph.nodes[n].extra)} for n in ids},
           "edges": [{"from": [e.src, e.src_port], "to": [e.dst, e.dst_port]}
                     for e in edges],
           "positions": {n: list(positions[n]) for n in ids if n in positions},
           reroute.KEY: {k: points for k, points in bends.items() if points},
           canvas_notes.KEY: [copy.deepcopy(n) for n in canvas_notes.notes(graph.ui)
                             if n["id"] in wanted]}
    used = _groups_used(graph, [graph.nodes[n].type for n in ids])
    if used:
        doc["groups"] = {name: group_entry(graph.groups[name]) for name in used}
    return json.dumps(doc, indent=1)


def _groups_used(graph: Graph, types: Iterable[str]) -> list[str]:
    """The groups these node types are instances of, with those their bodies use, nested
    ones first (each definition's body finds its groups already there)."""
    order: list[str] = []

    def visit(type_: str) -> None:
        name = type_[len(PREFIX):] if type_.startswith(PREFIX) else None
        if name is None or name in order or name not in graph.groups:
            return
        order.append(name)  # marked before its body: a (refused) self-use cannot recurse
        for inner in graph.groups[name].body.nodes.values():
            visit(inner.type)
        order.remove(name)
        order.append(name)

    for t in types:
        visit(t)
    return order


@dataclass
class Paste:
    """What to add for one paste: nodes under fresh ids, their wires and positions."""

    nodes: list[Node] = field(default_factory=list)
    edges: list[tuple[tuple[str, str], tuple[str, str]]] = field(default_factory=list)
    positions: dict[str, tuple[float, float]] = field(default_factory=dict)
    notes: list[dict[str, Any]] = field(default_factory=list)  # comments and backdrops
    reroutes: dict[str, list] = field(default_factory=dict)  # new wire key: its points
    # group definitions the graph lacks, as file entries (nested ones first), and those it
    # has the same of: both are read together, so a new body finds a kept group it uses
    groups: dict[str, dict] = field(default_factory=dict)
    kept_groups: dict[str, dict] = field(default_factory=dict)


def parse(text: str) -> dict[str, Any] | None:
    """The clip document in `text`, or None when it is not a nodegraph clip."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return None
    if not isinstance(doc.get("nodes"), dict):
        return None
    if not doc["nodes"] and not canvas_notes.notes(doc):
        return None
    return doc


def plan_paste(graph: Graph, doc: dict[str, Any], at: tuple[float, float] | None = None,
               offset: tuple[float, float] = (40.0, 40.0)) -> Paste:
    """Fresh ids and positions for pasting `doc` into `graph`.

    With `at` the clip's top-left corner lands there; otherwise it moves by `offset`.
    """
    paste, renamed, taken = Paste(), {}, set(graph.nodes)
    retyped = _plan_groups(graph, doc, paste)
    for old, entry in doc["nodes"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            continue
        new = _fresh_id(old, taken)
        taken.add(new)
        renamed[old] = new
        extra = {k: v for k, v in entry.items() if k not in ("type", "params")}
        type_: str = entry["type"]
        paste.nodes.append(Node(new, retyped.get(type_, type_), dict(entry.get("params") or {}),
                                extra))
    for e in doc.get("edges", []):
        try:
            (s, sp), (d, dp) = e["from"], e["to"]
        except (KeyError, TypeError, ValueError):
            continue
        if s in renamed and d in renamed:
            paste.edges.append(((renamed[s], sp), (renamed[d], dp)))
    notes = canvas_notes.notes(doc)
    dx, dy = _shift(doc.get("positions") or {}, renamed, notes, at, offset)
    paste.positions = _place(doc.get("positions") or {}, renamed, at, (dx, dy))
    paste.reroutes = _bends(doc, renamed, (dx, dy))
    taken_notes = [n["id"] for n in canvas_notes.notes(graph.ui)]
    for note in notes:
        placed = canvas_notes.moved(note, dx, dy)
        placed["id"] = canvas_notes.fresh_id(taken_notes, note["id"])
        taken_notes.append(placed["id"])
        paste.notes.append(placed)
    return paste


def _plan_groups(graph: Graph, doc: dict[str, Any], paste: Paste) -> dict[str, str]:
    """Which of the clip's group definitions to add (into `paste`), under which names;
    returns the node types to change (`group.g1` -> `group.g_2`). A definition the graph
    has the same of is used as it is; one whose name the graph uses otherwise (another
    definition, or cards of that type whose definition is missing) takes a fresh name, so
    pasting never changes what the graph's own cards compute."""
    entries = doc.get("groups")
    if not isinstance(entries, dict):
        return {}
    clip = {n: e for n, e in entries.items() if isinstance(n, str) and GROUP_NAME.match(n)
            and isinstance(e, dict)}
    taken = set(graph.groups) | {n.type[len(PREFIX):] for n in graph.nodes.values()
                                 if n.type.startswith(PREFIX)}
    retyped: dict[str, str] = {}
    for old, entry in clip.items():  # nested ones first: a body is retyped before it is kept
        entry = _retyped(entry, retyped)
        if old in graph.groups and group_entry(graph.groups[old]) == entry:
            paste.kept_groups[old] = entry
            continue
        new = _fresh_id(old, taken)
        taken.add(new)
        if new != old:
            retyped[PREFIX + old] = PREFIX + new
        paste.groups[new] = entry
    return retyped


def _retyped(entry: dict, retyped: dict[str, str]) -> dict:
    """`entry` with its body's instances of renamed groups renamed along."""
    nodes = entry.get("nodes")
    if not retyped or not isinstance(nodes, dict):
        return entry
    fixed = {n: ({**e, "type": retyped[e["type"]]} if isinstance(e, dict)
                 and e.get("type") in retyped else e) for n, e in nodes.items()}
    return {**entry, "nodes": fixed}


def _shift(positions: dict, renamed: dict[str, str], notes: list[dict], at, offset
           ) -> tuple[float, float]:
    """How far the clip moves: by `offset`, or so that its top-left corner lands at `at`."""
    if at is None:
        return offset
    corners = [(float(p[0]), float(p[1])) for n, p in positions.items()
               if n in renamed and isinstance(p, list | tuple) and len(p) == 2]
    corners += [(n["rect"][0], n["rect"][1]) for n in notes]
    if not corners:
        return at
    return (at[0] - min(x for x, _ in corners), at[1] - min(y for _, y in corners))


def _bends(doc: dict, renamed: dict[str, str], shift: tuple[float, float]
           ) -> dict[str, list]:
    """The copied wires' reroute points, keyed by the pasted wires, moved with the nodes."""
    table = doc.get(reroute.KEY)
    out: dict[str, list] = {}
    for e in doc.get("edges", []) if isinstance(table, dict) else []:
        try:
            (s, sp), (d, dp) = e["from"], e["to"]
        except (KeyError, TypeError, ValueError):
            continue
        points = reroute.stored({reroute.KEY: table}, Edge(s, sp, d, dp))
        if points and s in renamed and d in renamed:
            new = Edge(renamed[s], sp, renamed[d], dp)
            out[reroute.edge_key(new)] = [[x + shift[0], y + shift[1]] for x, y in points]
    return out


def _fresh_id(old: str, taken: set[str]) -> str:
    if old not in taken:
        return old
    base = old.rstrip("0123456789").rstrip("_") or "node"
    i = 2
    while f"{base}_{i}" in taken:
        i += 1
    return f"{base}_{i}"


def _place(positions: dict, renamed: dict[str, str], at, offset) -> dict[str, tuple]:
    known = {renamed[n]: (float(p[0]), float(p[1])) for n, p in positions.items()
             if n in renamed and isinstance(p, list | tuple) and len(p) == 2}
    if not known:
        base = at or (0.0, 0.0)
        return {new: (base[0] + 30.0 * i, base[1] + 30.0 * i)
                for i, new in enumerate(renamed.values())}
    dx, dy = offset  # from _shift: the whole clip (nodes and notes) moves alike
    return {n: (x + dx, y + dy) for n, (x, y) in known.items()}
