"""Groups: a set of nodes saved under a name, used as one block — and sharing weights.

A group definition holds a body (nodes and wires, itself a `Graph`) and names its ports:
each group input feeds one or more inner inputs, each group output is one inner output. A
node of type ``group.NAME`` is an instance; its `share` param names another instance of the
same group whose weights it uses (a GAN discriminator applied to real and to fake images, a
Siamese pair); without it every instance has weights of its own (stacked transformer
blocks). Its `trainable` param, false, freezes every weight inside the instance (and inside
instances nested in it): fine-tuning keeps an imported model's lower groups. Groups nest.
A body may declare ties (one parameter of two inner blocks); every instance applies them to
its own inner nodes.

A block library can ship groups: a registry block of kind ``group`` whose `build` is a
`Shipped` carrying the definition (see `nodes.group`). A graph uses one by type,
like any block, without a copy in its file; a group of the graph's own with the same name
takes precedence, and `import_group` makes that copy, to edit it. (The definitions and the
registry view live in `nodegraph.model.groupdefs`, which `Graph` imports; this module
expands and edits graphs.)

Execution flattens: each instance's inner nodes become nodes ``INSTANCE__INNER`` of one flat
graph, wires rerouted through the ports, and a sharing instance's nodes point at the owner's
nodes so compile gives them the same module. Validation runs on the flat graph and reports
problems and shapes back on the instance. The editor opens a group's body like a graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nodegraph.model.errors import GraphError, Problem
from nodegraph.model.graph import Edge, Graph, Node, Tie
from nodegraph.model.groupdefs import (
    GROUP_NAME,
    MAX_DEPTH,
    MAX_NODES,
    PREFIX,
    SEP,
    GroupDef,
    GroupError,
    GroupRegistry,
    Shipped,
    definition,
    group_spec,
    import_group,
    is_group,
    shipped_spec,
)

__all__ = [  # the definitions are re-exported: callers import groups from one place
    "GROUP_NAME", "MAX_DEPTH", "MAX_NODES", "PREFIX", "SEP", "Flat", "GroupDef", "GroupError",
    "GroupRegistry", "Shipped", "definition", "flatten", "group_spec", "has_groups",
    "group_loop", "import_group", "is_group", "make_group", "shipped_spec",
]


@dataclass
class Flat:
    """A graph with its groups expanded, and how to map back."""

    graph: Graph
    origin: dict[str, str] = field(default_factory=dict)  # flat id -> top-level node id
    shared: dict[str, str] = field(default_factory=dict)  # flat id -> flat id of the owner
    inputs: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)
    outputs: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)  # wires to ports a group lacks
    frozen: set[str] = field(default_factory=set)  # flat ids in a `trainable = false` instance

    def members(self, instance: str) -> list[str]:
        """The flat node ids that make up a top-level node (itself, when not a group)."""
        return [f for f, o in self.origin.items() if o == instance]


def has_groups(graph) -> bool:
    return any(is_group(n.type) for n in graph)


def flatten(graph) -> Flat:
    """Expand every group instance, recursively; wires go through the group's ports.

    Raises GroupError for a group that uses itself, one that would expand to more than
    MAX_NODES nodes, or a `share` that names no earlier instance of the same group; a wire
    to a port a group does not have is left out and listed in `problems`, on the top-level
    node it belongs to.
    """

    _check_size(graph)
    flat = Flat(Graph(graph.name, graph.base_registry))
    flat.graph.replace_training(graph.training)
    flat.graph.folder = graph.folder
    flat.graph.set_ties(graph.ties)
    instances: dict[str, str] = {}  # instance flat id -> group name
    wired: set = set()

    def expand(g, prefix: str, top: str | None, using: tuple[str, ...],
               frozen: bool = False) -> None:
        for node in g:
            fid = prefix + node.id
            origin = top or node.id
            if frozen:  # an enclosing instance is not trained: nor is anything inside it
                flat.frozen.add(fid)
            if is_group(node.type):
                name = node.type[len(PREFIX):]
                defn = definition(graph, name)
                if defn is None:  # left for validation to report as an unknown block
                    flat.graph.add_node(Node(fid, node.type, node.params), strict=False)
                    flat.origin[fid] = origin
                    continue
                _check_nesting(name, using, node.id, origin)
                instances[fid] = name
                expand(defn.body, fid + SEP, origin, (*using, name),
                       frozen or node.params.get("trainable", True) is False)
                inner = fid + SEP  # the body's ties, between this instance's inner nodes
                flat.graph.set_ties([*flat.graph.ties, *(
                    Tie(inner + t.src, t.src_param, inner + t.dst, t.dst_param)
                    for t in defn.body.ties)])
                flat.inputs[(fid, "")] = []
                for port, targets in defn.inputs.items():
                    flat.inputs[(fid, port)] = [(fid + SEP + n, p) for n, p in targets]
                for port, (n, p) in defn.outputs.items():
                    flat.outputs[(fid, port)] = (fid + SEP + n, p)
                share = node.params.get("share")
                if share:
                    _share(flat, node, prefix, name, instances, defn.body, origin)
            else:
                flat.graph.add_node(Node(fid, node.type, node.params), strict=False)
                flat.origin[fid] = origin
        for e in g.edges:
            src = _resolve_out(flat, (prefix + e.src, e.src_port))
            dsts = _resolve_in(flat, (prefix + e.dst, e.dst_port))
            if not _wire_ends_exist(flat, e, prefix, top, src, dsts, instances):
                continue
            for dst in dsts:
                edge = Edge(src[0], src[1], dst[0], dst[1])
                if edge not in wired:  # a set: a list scan made large expansions quadratic
                    wired.add(edge)
                    flat.graph.connect(edge.source, edge.target, strict=False)

    expand(graph, "", None, ())
    # a port of a nested instance leads on to inner nodes: list those, so a caller
    # (a procedure, the preview) finds the blocks that run in one look-up
    flat.inputs = {ref: [r for t in targets for r in _resolve_in(flat, t)]
                   for ref, targets in flat.inputs.items()}
    flat.outputs = {ref: _resolve_out(flat, ref) for ref in flat.outputs}
    for sharer, owner in list(flat.shared.items()):
        for _ in range(len(flat.shared)):  # a chain of shares ends at the real owner
            if owner not in flat.shared:
                break
            owner = flat.shared[owner]
        flat.shared[sharer] = owner
    return flat


def _check_nesting(name: str, using: tuple[str, ...], node: str, top: str) -> None:
    """Refuse group `name` met again inside itself, or nested deeper than MAX_DEPTH."""
    chain = " -> ".join([*using, name])
    if name in using:
        raise GroupError(f"group '{name}' uses itself ({chain}, through node '{node}'); a "
                         "group cannot contain itself", top)
    if len(using) >= MAX_DEPTH:
        raise GroupError(f"groups nest deeper than {MAX_DEPTH} levels ({chain})", top)


def _check_size(graph) -> None:
    """Count the nodes expansion would make, before making them (memoised per group, so a
    file of a few lines cannot ask for 10**16 nodes and hang), and find self-use early."""
    sizes: dict[str, int] = {}

    def size(name: str, using: tuple[str, ...], node: str, top: str) -> int:
        _check_nesting(name, using, node, top)
        if name not in sizes:
            defn = definition(graph, name)
            sizes[name] = 1 if defn is None else sum(
                1 + size(n.type[len(PREFIX):], (*using, name), n.id, top) if is_group(n.type)
                else 1 for n in defn.body)
        return sizes[name]

    total = 0
    for node in graph:
        count = size(node.type[len(PREFIX):], (), node.id, node.id) if is_group(node.type) \
            else 1
        total += count
        if total > MAX_NODES:
            raise GroupError(f"expanding the groups would make more than {MAX_NODES:,} nodes "
                             f"(node '{node.id}' alone: {count:,}); groups nested in groups "
                             "multiply", node.id)


def _wire_ends_exist(flat: Flat, e, prefix: str, top: str | None, src, dsts,
                     instances: dict[str, str]) -> bool:
    """Whether a wire of `g` reaches flat nodes at both ends; if not, a problem says which
    group port is missing (a node retyped to a group whose ports differ keeps old wires)."""
    nodes = flat.graph.nodes
    ends = [(src, e.src, e.src_port, "output")] + [(d, e.dst, e.dst_port, "input")
                                                   for d in dsts]
    for (flat_id, _), node, port, side in ends:
        if flat_id in nodes:
            continue
        name = instances.get(prefix + node)
        where = f"inside, at '{prefix[len(top) + len(SEP):].replace(SEP, '/')}{node}': " \
            if top else ""
        if name is not None:
            ports = flat.outputs if side == "output" else flat.inputs
            names = sorted(p for (i, p) in ports if i == prefix + node and p) or ["none"]
            message = (f"{where}group.{name} '{node}' has no {side} '{port}' "
                       f"({side}s: {', '.join(names)})")
            hint = "wire one of the group's ports instead"
        else:
            message, hint = f"{where}wire {e} names a node that does not exist", ""
        flat.problems.append(Problem(top or node, port, "unknown_port", message, hint))
        return False
    return True


def _share(flat: Flat, node, prefix: str, name: str, instances: dict[str, str], body,
           origin: str) -> None:
    """Point the inner nodes of instance `node` at those of the instance it shares with."""
    share = node.params.get("share")
    if not isinstance(share, str):
        raise GroupError(f"node '{node.id}': 'share' must be the id of another instance of "
                         f"group '{name}' (text), got {share!r}", origin)
    fid, owner = prefix + node.id, prefix + share
    if owner == fid:
        raise GroupError(f"node '{node.id}' shares weights with itself; name another instance "
                         f"of group '{name}' in 'share', or leave it empty", origin)
    if instances.get(owner) != name:
        raise GroupError(f"'{node.id}' shares weights with '{share}', which is not an instance "
                         f"of group '{name}' defined before it", origin)
    for inner in body.nodes:
        flat.shared[fid + SEP + inner] = owner + SEP + inner


def _resolve_out(flat: Flat, ref: tuple[str, str]) -> tuple[str, str]:
    while ref in flat.outputs:
        ref = flat.outputs[ref]
    return ref


def _resolve_in(flat: Flat, ref: tuple[str, str]) -> list[tuple[str, str]]:
    if ref not in flat.inputs:
        return [ref]
    return list(dict.fromkeys(r for target in flat.inputs[ref]  # each inner input once
                              for r in _resolve_in(flat, target)))


def make_group(graph, node_ids: list[str], name: str, instance: str | None = None) -> str:
    """Move `node_ids` into a new group `name` and put one instance in their place.

    Wires crossing the selection become the group's ports (named after the inner port,
    made unique), and so do the outputs of selected nodes that feed nothing yet; returns the
    instance's id. Positions of the moved nodes go with them. A tie between two moved nodes
    goes into the body (each later instance ties its own pair); a tie between a moved node
    and one outside stays in the graph, naming the node inside the instance; so does one
    whose end is already nested in a chosen instance (`inner__fc`, at any depth: a body's
    ties name the body's own nodes).
    """

    if name in graph.groups:
        raise GraphError(f"a group named '{name}' already exists")
    strays = [n.id for n in graph.nodes.values() if n.type == PREFIX + name]
    if strays:  # cards whose definition is missing would become instances of this one
        raise GraphError(f"'{name}' is the group type of {', '.join(strays[:5])}, whose "
                         "definition is missing; choose another name")
    if not GROUP_NAME.match(name):
        raise GraphError(f"'{name}' is not a valid group name (a letter, then letters, digits "
                         "and _)")
    chosen = set(node_ids)
    missing = chosen - set(graph.nodes)
    if missing:
        raise GraphError(f"no nodes {sorted(missing)} to group")
    loop = group_loop(graph, node_ids)
    if loop:  # checked before anything changes: a refused grouping leaves the graph whole
        raise GraphError(f"grouping {', '.join(sorted(chosen))} would make a loop: "
                         f"{' → '.join(loop)} leaves the group and comes back into it; add "
                         f"{', '.join(n for n in loop if n not in chosen)} to the selection "
                         "or group fewer nodes")
    body = Graph(name, graph.base_registry)
    for nid in node_ids:
        body.add_node(graph.nodes[nid], strict=False)
    inputs: dict[str, list[tuple[str, str]]] = {}
    outputs: dict[str, tuple[str, str]] = {}
    incoming, outgoing = [], []
    for e in graph.edges:
        if e.src in chosen and e.dst in chosen:
            body.connect(e.source, e.target, strict=False)
        elif e.dst in chosen:
            incoming.append(e)
        elif e.src in chosen:
            outgoing.append(e)
    by_source: dict[tuple[str, str], str] = {}
    for e in incoming:  # one group input per outside source, feeding every inner target
        port = by_source.get(e.source)
        if port is None:
            port = _unique(e.dst_port, inputs)
            by_source[e.source] = port
            inputs[port] = []
        inputs[port].append(e.target)
    out_port: dict[tuple[str, str], str] = {}
    sinks = [(nid, p.name) for nid in node_ids if not graph.edges_from(nid)
             and graph.nodes[nid].type in graph.registry
             for p in graph.registry.get(graph.nodes[nid].type).outputs]
    for source in [e.source for e in outgoing] + sinks:  # wired outputs, then loose ends
        if source not in out_port:
            out_port[source] = _unique(source[1], outputs)
            outputs[out_port[source]] = source
    positions = graph.ui.get("positions", {})
    inside = {n: positions[n] for n in node_ids if n in positions}
    if inside:  # the definition's ui is its body's: saved with the group
        body.set_ui("positions", inside)
    graph.define_group(GroupDef(name, body, inputs, outputs))
    instance = instance or graph.new_id(name)
    body.set_ties(t for t in graph.ties if t.src in chosen and t.dst in chosen)

    def moved(ref: str) -> str:  # a node now inside the instance, at any depth
        return instance + SEP + ref if _within(graph, ref, chosen) else ref
    graph.set_ties(Tie(moved(t.src), t.src_param, moved(t.dst), t.dst_param)
                   for t in graph.ties if t not in body.ties)
    centre = [sum(positions[n][i] for n in node_ids if n in positions) /
              max(1, sum(1 for n in node_ids if n in positions)) for i in (0, 1)]
    for nid in node_ids:
        graph.remove(nid)
    graph.add(PREFIX + name, id=instance)
    if positions:
        graph.set_positions({instance: centre})
    for source, port in by_source.items():
        graph.connect(source, (instance, port))
    for e in outgoing:
        graph.connect((instance, out_port[e.source]), e.target)
    return instance


def _within(graph, ref: str, chosen: set[str]) -> bool:
    """Whether a tie's end names a chosen node or a node nested in a chosen instance
    (`enc__layer__fc`, a flat id: ties name nodes inside groups at any depth)."""
    return ref in chosen or ref not in graph.nodes and any(ref.startswith(c + SEP)
                                                           for c in chosen)


def group_loop(graph, node_ids) -> list[str]:
    """A path that leaves the chosen nodes and comes back into them (chosen, outside...,
    chosen), or [] when there is none: one instance in their place would then feed itself."""
    chosen = set(node_ids)
    after: dict[str, list[str]] = {}
    for e in graph.edges:
        after.setdefault(e.src, []).append(e.dst)
    came_from: dict[str, str] = {}
    frontier = []
    for start in (n for n in graph.nodes if n in chosen):  # graph order: the same path each time
        for nxt in after.get(start, []):
            if nxt not in chosen and nxt not in came_from:
                came_from[nxt] = start
                frontier.append(nxt)
    while frontier:  # breadth first through outside nodes: the shortest way back in
        node = frontier.pop(0)
        for nxt in after.get(node, []):
            if nxt in chosen:
                path = [nxt, node]
                while path[-1] in came_from:
                    path.append(came_from[path[-1]])
                return path[::-1]
            if nxt not in came_from:
                came_from[nxt] = node
                frontier.append(nxt)
    return []


def _unique(base: str, taken: dict) -> str:
    name, i = base, 2
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    return name
