"""Find a node in a graph and its groups by what a person remembers of it.

Typing `fc250`, `layer3_1_conv2`, `Conv2d`, `0.05` or a group's name lists the matching
nodes — by id, block type, param value or group name — each with its group path (the
instance ids from the graph down to the body that holds it), so the editor can open those
group tabs and frame the node. Qt-free: the editor's Find panel and its tests call it.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodegraph.model.groupdefs import PREFIX

LIMIT = 200  # a list longer than this is not read; the count says how many more there were

# how a hit ranks: the id itself first, then what it says, then what it is
_RANK = {"id": 0, "id_prefix": 1, "id_part": 2, "type": 3, "group": 4, "param": 5}


@dataclass(frozen=True)
class Hit:
    node: str  # the node's id in the body that holds it
    path: tuple[str, ...]  # group instance ids from the graph down to that body
    type: str
    why: str  # "id", "id_prefix", "id_part", "type", "group" or "param"
    detail: str = ""  # the param that matched, as `name=value`

    @property
    def where(self) -> str:
        """The path a person reads: `encoder › block_2 › fc250`."""
        return " › ".join((*self.path, self.node))


def find(graph, text: str, limit: int = LIMIT) -> tuple[list[Hit], int]:
    """Nodes of `graph` (and of the groups its instances open) matching `text`, best
    first, at most `limit` of them; and how many matched in all. Text that starts a node's id
lists the nodes by id only."""
    needle = text.strip().lower()
    if not needle:
        return [], 0
    hits: list[Hit] = []
    _walk(graph, graph, needle, (), hits, set())
    if any(h.why in ("id", "id_prefix") for h in hits):
        # the text names nodes by id (`conv2`): those are meant, not every Conv2d whose
        # type happens to contain it
        hits = [h for h in hits if h.why in ("id", "id_prefix", "id_part")]
    hits.sort(key=lambda h: (_RANK[h.why], len(h.path), len(h.node), h.path, h.node))
    return hits[:limit], len(hits)


def _walk(root, graph, needle: str, path: tuple[str, ...], hits: list[Hit],
          opening: set[str]) -> None:
    groups = getattr(root, "groups", {})
    for node in graph:
        hit = _match(node, needle, path)
        if hit is not None:
            hits.append(hit)
        name = node.type[len(PREFIX):] if node.type.startswith(PREFIX) else None
        # a group's body is searched through each instance; a group that (wrongly) holds
        # itself is not walked twice, so a hostile file cannot loop the search
        if name is not None and name in groups and name not in opening:
            _walk(root, groups[name].body, needle, (*path, node.id), hits, opening | {name})


def _match(node, needle: str, path: tuple[str, ...]) -> Hit | None:
    ident = node.id.lower()
    if ident == needle:
        return Hit(node.id, path, node.type, "id")
    if ident.startswith(needle):
        return Hit(node.id, path, node.type, "id_prefix")
    if needle in ident:
        return Hit(node.id, path, node.type, "id_part")
    kind = node.type.lower()
    if kind.startswith(PREFIX) and needle in kind[len(PREFIX):]:
        return Hit(node.id, path, node.type, "group")
    if needle in kind:
        return Hit(node.id, path, node.type, "type")
    for name, value in node.params.items():
        shown = _shown(value)
        if needle in shown.lower():
            return Hit(node.id, path, node.type, "param", f"{name}={shown}")
    return None


def _shown(value) -> str:
    """A param value as the inspector shows it (bounded, so a huge list stays cheap)."""
    text = str(value)
    return text if len(text) <= 200 else text[:200]
