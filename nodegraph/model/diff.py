"""What changed between two graph files: nodes, wires, params, training settings and groups.

Two documents (as `fileformat.read_document` returns them: checked, migrated, never run)
are compared by what they mean, not by their text: a node is its id, block type and params;
a wire is known by the input it feeds (an input takes one wire), so a wire moved to another
source is one change, not a removal and an addition; a node added or removed carries its
wires with it (counted on the node, not listed again); a group's body is compared like the
graph, its changes prefixed with the group's name. Positions and other `ui` state are not
changes. `lines` writes one graph as sorted lines, for git's `textconv` diff driver.
Qt-free: the CLI (`nodegraph diff`) and the editor's Compare view both read `Change`s.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

MAX_SHOWN = 80  # a value longer than this is shortened in the text (never in --json)


@dataclass(frozen=True)
class Change:
    kind: str  # "node", "wire", "param", "training" or "group"
    action: str  # "added", "removed" or "changed"
    node: str | None = None  # the node (for a wire: the node whose input it feeds)
    name: str | None = None  # the param, the setting, the input port, or the group
    before: Any = None
    after: Any = None
    group: str | None = None  # the group whose body holds it (None: the graph itself)
    wires: int = 0  # for a node added or removed: how many wires went with it

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None and v != 0
                or k in ("kind", "action")}

    def text(self) -> str:
        """One line: `~ param   hidden.out_features: 4 -> 8`."""
        mark = {"added": "+", "removed": "-", "changed": "~"}[self.action]
        inside = f"[{self.group}] " if self.group else ""
        return printable(f"{mark} {self.kind:<8} {inside}{self._what()}")

    def _what(self) -> str:
        if self.kind == "node":
            if self.action == "changed":
                return f"{self.node}: type {self.before} -> {self.after}"
            value = self.after if self.action == "added" else self.before
            wires = f", {self.wires} wire(s)" if self.wires else ""
            return f"{self.node} ({value}{wires})"
        if self.kind == "wire":
            into = f"{self.node}.{self.name}"
            if self.action == "changed":
                return f"{into}: from {self.before} -> from {self.after}"
            return f"{self.before or self.after} -> {into}"
        if self.kind == "param":
            return f"{self.node}.{self.name}: {self._pair()}"
        if self.kind == "training":
            return f"{self.name}: {self._pair()}"
        return f"{self.name}" + (f" ({self.after or self.before})"
                                 if self.after or self.before else "")

    def _pair(self) -> str:
        if self.action == "added":
            return f"(unset) -> {_short(self.after)}"
        if self.action == "removed":
            return f"{_short(self.before)} -> (unset)"
        return f"{_short(self.before)} -> {_short(self.after)}"


def printable(text: str) -> str:
    """`text` with control characters written as escapes: a hostile id cannot move the
    cursor or recolour the terminal that prints the diff."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _full(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _short(value: Any) -> str:
    text = _full(value)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN - 1] + "…"


def compare(a: dict, b: dict) -> list[Change]:
    """Every change from document `a` to document `b`, in a stable order: nodes, params,
    wires, training, then each group's body."""
    changes = _body(a, b, None)
    changes += _settings(_dict(a.get("training")), _dict(b.get("training")))
    ga, gb = _dict(a.get("groups")), _dict(b.get("groups"))
    for name in sorted(set(ga) | set(gb), key=str):
        if name not in gb:
            changes.append(Change("group", "removed", name=str(name)))
        elif name not in ga:
            changes.append(Change("group", "added", name=str(name)))
        else:
            changes += _body(_dict(ga[name]), _dict(gb[name]), str(name))
    return changes


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _nodes(doc: dict) -> dict[str, tuple[str, dict]]:
    out = {}
    for node_id, entry in _dict(doc.get("nodes")).items():
        entry = _dict(entry)
        out[str(node_id)] = (str(entry.get("type", "?")), _dict(entry.get("params")))
    return out


def _wires(doc: dict) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Wires by the input they feed: (node, port) -> sources (one, unless the file is bad)."""
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    edges = doc.get("edges")
    for e in edges if isinstance(edges, list) else []:
        ends = _ends(e)
        if ends is not None:
            out.setdefault(ends[1], []).append(ends[0])
    return {k: sorted(v) for k, v in out.items()}


def _ends(entry: Any) -> tuple[tuple[str, str], tuple[str, str]] | None:
    if not isinstance(entry, dict):
        return None
    src, dst = entry.get("from"), entry.get("to")
    if not (isinstance(src, list) and isinstance(dst, list) and len(src) == len(dst) == 2):
        return None
    return (str(src[0]), str(src[1])), (str(dst[0]), str(dst[1]))


def _body(a: dict, b: dict, group: str | None) -> list[Change]:
    na, nb = _nodes(a), _nodes(b)
    wa, wb = _wires(a), _wires(b)
    gone, new = set(na) - set(nb), set(nb) - set(na)
    out: list[Change] = []

    def touching(wires: dict, nodes: set) -> dict[str, int]:
        count: dict[str, int] = {}
        for (dst, _), sources in wires.items():
            for src, _ in sources:
                for n in {src, dst} & nodes:
                    count[n] = count.get(n, 0) + 1
        return count

    lost, won = touching(wa, gone), touching(wb, new)
    for n in sorted(gone):
        out.append(Change("node", "removed", n, before=na[n][0], group=group,
                          wires=lost.get(n, 0)))
    for n in sorted(new):
        out.append(Change("node", "added", n, after=nb[n][0], group=group,
                          wires=won.get(n, 0)))
    for n in sorted(set(na) & set(nb)):
        (ta, pa), (tb, pb) = na[n], nb[n]
        if ta != tb:
            out.append(Change("node", "changed", n, before=ta, after=tb, group=group))
        for p in sorted(set(pa) | set(pb), key=str):
            if p not in pb:
                out.append(Change("param", "removed", n, str(p), before=pa[p], group=group))
            elif p not in pa:
                out.append(Change("param", "added", n, str(p), after=pb[p], group=group))
            elif pa[p] != pb[p] or type(pa[p]) is not type(pb[p]):
                out.append(Change("param", "changed", n, str(p), pa[p], pb[p], group=group))
    with_node = gone | new  # wires of an added or removed node went with it

    def shown(sources: list) -> str:
        return ", ".join(f"{s}.{p}" for s, p in sources)

    for into in sorted(set(wa) | set(wb)):
        sa = [s for s in wa.get(into, []) if s[0] not in with_node]
        sb = [s for s in wb.get(into, []) if s[0] not in with_node]
        if into[0] in with_node or sa == sb:
            continue
        if sa and sb:
            out.append(Change("wire", "changed", into[0], into[1], shown(sa), shown(sb),
                              group=group))
        elif sa:
            out.append(Change("wire", "removed", into[0], into[1], before=shown(sa),
                              group=group))
        else:
            out.append(Change("wire", "added", into[0], into[1], after=shown(sb),
                              group=group))
    return out


def _settings(a: dict, b: dict) -> list[Change]:
    out = []
    for k in sorted(set(a) | set(b), key=str):
        if k not in b:
            out.append(Change("training", "removed", name=str(k), before=a[k]))
        elif k not in a:
            out.append(Change("training", "added", name=str(k), after=b[k]))
        elif a[k] != b[k]:
            out.append(Change("training", "changed", name=str(k), before=a[k], after=b[k]))
    return out


def summary(changes: list[Change]) -> str:
    """`3 changes: 1 node, 1 param, 1 wire` (or `no changes`)."""
    if not changes:
        return "no changes"
    kinds: dict[str, int] = {}
    for c in changes:
        kinds[c.kind] = kinds.get(c.kind, 0) + 1
    parts = ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in kinds.items())
    return f"{len(changes)} change{'s' if len(changes) > 1 else ''}: {parts}"


def lines(doc: dict) -> list[str]:
    """One graph as sorted lines that a line diff reads well (git's textconv): its name,
    training settings, each node with its params, each wire, and each group's body."""
    # values in full: a textconv that shortened them would hide a change past the cut
    out = [f"graph {_full(doc.get('name', ''))}"]
    return [printable(line) for line in _lines(doc, out)]


def _lines(doc: dict, out: list[str]) -> list[str]:
    out += [f"training {k} = {_full(v)}" for k, v in
            sorted(_dict(doc.get("training")).items(), key=lambda kv: str(kv[0]))]
    out += _body_lines(doc, "")
    for name, body in sorted(_dict(doc.get("groups")).items(), key=lambda kv: str(kv[0])):
        out.append(f"group {name}")
        out += _body_lines(_dict(body), f"[{name}] ")
    return out


def _body_lines(doc: dict, prefix: str) -> list[str]:
    out = []
    for n, (t, params) in sorted(_nodes(doc).items()):
        shown = " ".join(f"{k}={_full(v)}" for k, v in sorted(params.items(),
                                                                key=lambda kv: str(kv[0])))
        out.append(f"{prefix}node {n}  {t}" + (f"  {shown}" if shown else ""))
    for (dst, port), sources in sorted(_wires(doc).items()):
        out += [f"{prefix}wire {s}.{p} -> {dst}.{port}" for s, p in sources]
    return out
