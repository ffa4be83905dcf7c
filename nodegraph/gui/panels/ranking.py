"""Block search that knows ML: abbreviations, what usually comes next, recents, favourites.

`rank(query, specs, context, recent, favourites)` orders blocks for the palette, the Tab
search and the loose-wire popup (Qt-free, so it is tested without a window):

- the typed text first (`fuzzy.block_score`), where the words people use count as the
  name: "xent" and "ce" are CrossEntropy, "bn" BatchNorm, "mha" MultiHeadSelfAttention,
  "fc" and "dense" Linear, "conv" Conv2d (declared on each block: `Search.words`);
- then what fits the wire being drawn: a block whose first input takes it before one
  that only takes it on a side port (a loss's `target`);
- then what usually follows the block the wire leaves (`FOLLOWS`): after a layer's
  output (logits) the losses and metrics, after a loss the optimizers;
- then the user's favourites and most recent blocks, and the blocks most networks use
  (`Search.popularity`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nodegraph.gui.document.wiring import compatible_input, compatible_output
from nodegraph.gui.panels.fuzzy import block_score
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import BlockSpec

SYNONYM_SCORE = 900.0  # under an exact name (1000), over any fuzzy match

# block family -> families that usually read its output, best first (a block whose readers
# differ from its family's says so in its declaration: `Search.follows`)
FOLLOWS: dict[str, tuple[str, ...]] = {
    "layers": ("losses", "metrics", "activations", "norm", "layers"),
    "attention": ("attention", "norm", "layers", "losses"),
    "recurrent": ("layers", "losses", "metrics"),
    "graph": ("activations", "losses", "metrics", "graph"),
    "activations": ("layers", "norm", "losses", "metrics"),
    "norm": ("activations", "layers"),
    "data": ("layers", "norm", "attention", "recurrent", "losses", "metrics"),
    "losses": ("optimizers", "losses"),
    "schedules": ("optimizers",),
    "generative": ("optimizers", "losses"),
    "samplers": ("layers", "groups"),
}
FOLLOW_SCORE = 12.0  # for the first family of FOLLOWS; a little less for each later one
PRIMARY_SCORE = 6.0  # the wire would go into the block's first input
FAVOURITE_SCORE = 8.0
RECENT_SCORE = 5.0  # for the most recent block; less for older ones


@dataclass(frozen=True)
class Context:
    """Where the search was opened: the block a loose wire leaves (or enters) and how each
    offered block would take it (block id -> the port it would be wired to)."""

    block: str | None = None  # the block type at the wire's other end
    output: bool = True  # the wire leaves that block's output (offer blocks that read it)
    ports: tuple[tuple[str, str], ...] = ()  # (block id, the port the wire would use)
    port: str = ""  # the port the wire comes from
    follows: tuple[str, ...] = ()  # what the block's declaration says usually reads it


def synonym_score(query: str, spec: BlockSpec) -> float | None:
    """SYNONYM_SCORE (less for a later meaning) when `query` is a word that names `spec`
    (the words people use, declared on the block: `Search.words`)."""
    rank = spec.search.rank(query.strip().lower().replace(" ", "").replace("-", ""))
    return None if rank is None else SYNONYM_SCORE - rank


def text_score(query: str, spec: BlockSpec) -> float | None:
    """How well the typed text names `spec` (None: not at all)."""
    fuzzy = block_score(query, spec)
    word = synonym_score(query, spec)
    if word is None:
        return fuzzy
    return max(word, fuzzy or 0.0)


def follow_score(context: Context | None, spec: BlockSpec) -> float:
    """How usual `spec` is at the other end of the context's wire."""
    if context is None or context.block is None:
        return 0.0
    score = 0.0
    if context.output:
        family = context.block.split(".", 1)[0]
        follows = context.follows or FOLLOWS.get(family, ())
        if context.port in ("y", "target", "labels"):  # the answers go to losses and metrics
            follows = ("losses", "metrics")
        if spec.category in follows:
            score += FOLLOW_SCORE - 2.0 * follows.index(spec.category)
    else:  # offered blocks feed the context's block: what usually comes before it
        family = context.block.split(".", 1)[0]
        before = [f for f, after in FOLLOWS.items() if "." not in f and family in after]
        if spec.category in before:
            score += FOLLOW_SCORE / 2
    ports = dict(context.ports)
    port = ports.get(spec.id)
    if port is not None:
        side = spec.inputs if context.output else spec.outputs
        if side and side[0].name == port:
            score += PRIMARY_SCORE
    return score


def rank(query: str, specs: Iterable[BlockSpec], context: Context | None = None,
         recent: Sequence[str] = (), favourites: Iterable[str] = ()) -> list[BlockSpec]:
    """The specs matching `query` (all when it is empty), best first (ties by id)."""
    favourite = set(favourites)
    recency = {b: RECENT_SCORE * (1 - i / max(len(recent), 1)) for i, b in enumerate(recent)}
    scored = []
    for spec in specs:
        text = text_score(query, spec) if query.strip() else 0.0
        if text is None:
            continue
        extra = follow_score(context, spec) + recency.get(spec.id, 0.0) \
            + spec.search.popularity
        if spec.id in favourite:
            extra += FAVOURITE_SCORE
        scored.append((text + extra, spec))
    scored.sort(key=lambda pair: (-pair[0], pair[1].id))
    return [spec for _, spec in scored]


def context_for(graph, ref: tuple[str, str], output: bool, specs: Iterable[BlockSpec]
                ) -> Context:
    """The context of a wire dropped loose from port `ref` (an output when `output`)."""
    node = graph.nodes.get(ref[0])
    ports = []
    for spec in specs:
        port = compatible_input(graph, ref, spec) if output else \
            compatible_output(graph, ref, spec)
        if port is not None:
            ports.append((spec.id, port.name))
    return Context(node.type if node is not None else None, output, tuple(ports), ref[1],
                   _follows(graph, node.type) if node is not None else ())


def context_after(graph, node_id: str | None) -> Context | None:
    """The context of a search opened with `node_id` selected: what usually follows it."""
    node = graph.nodes.get(node_id) if node_id else None
    return Context(node.type, True, follows=_follows(graph, node.type)) \
        if node is not None else None


def _follows(graph, block_type: str) -> tuple[str, ...]:
    """What the declaration of `block_type` says usually reads its output (empty: its
    family's usual readers, or a block the registry does not know)."""
    try:
        return graph.registry.get(block_type).search.follows
    except NodegraphError:
        return ()
