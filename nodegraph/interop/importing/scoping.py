"""Names and scopes of planned nodes: the module whose forward made each, ties of shared weights.

Functional ops are named by their module's path (`layer1_0_add`), the groups follow the
paths (`scopes`), and one parameter used by several calls is tied in the graph.
"""

from __future__ import annotations

import keyword
from typing import Any

from torch import nn

from nodegraph.interop.importing.naming import _owner

_MODULE_STATE = frozenset(vars(nn.Module()))  # `training`, `_parameters`, ...


def tie_shared(importer: Any) -> None:
    """One parameter used by several calls — a module called twice, GPT's lm_head
    reusing the token embedding, a module's weight also read in forward — is tied in the
    graph (the first call's owns it), so training moves them as the module does."""
    owner: dict[int, tuple[Any, str]] = {}
    for node, planned in importer.planned.items():
        if node.op == "get_attr" and planned.type == "layers.Parameter":
            # a weight read in forward (VQ's codebook, searched with cdist) that a module
            # called as a block also holds (the codebook's nn.Embedding): one tensor
            param = importer._owner_attr(node.target)
            first = owner.setdefault(id(param), (planned, "value"))
            if first[0] is not planned:
                importer.ties.append((first[0], planned, "value", first[1]))
            continue
        if node.op != "call_module":
            continue
        prefix = "module." if planned.type == "opaque.Module" else ""
        for name, param in importer.root.get_submodule(node.target).named_parameters():
            key = f"{prefix}{name}"
            if key not in planned.weights:
                continue
            first = owner.setdefault(id(param), (planned, key))
            if first[0] is not planned:
                importer.ties.append((first[0], planned, key, first[1]))


def name_by_scope(importer: Any) -> None:
    """Functional ops named by the module whose forward made them and what they do
    (`layer1_0_add`, `attn_softmax`), not fx's `add_33`; a submodule's call keeps fx's
    name, its path. An id that is a method or attribute of nn.Module (`to`, `forward`,
    `training`) or a Python keyword (`and`, from `operator.and_`) gets `_op`: the Python
    export makes each node an attribute."""
    taken = {n.name for n in importer.traced.graph.nodes if n.op in ("placeholder",
                                                                   "call_module")}
    for node, planned in importer.planned.items():
        if node.op not in ("call_function", "call_method") or planned.id != node.name:
            continue
        # (a module path may hold any character: regnet's `block1-0`)
        scope = "".join(c if c.isalnum() or c == "_" else "_" for c in _owner(node))
        base = node.name.rstrip("0123456789").rstrip("_") or "op"
        name = f"{scope}_{base}" if scope else base
        if hasattr(nn.Module, name) or name in _MODULE_STATE or keyword.iskeyword(name):
            name += "_op"
        candidate, count = name, 1
        while candidate in taken:
            count += 1
            candidate = f"{name}_{count}"
        taken.add(candidate)
        planned.id = candidate


def scopes(importer: Any) -> dict[str, str]:
    """Planned node id -> the dotted path of the module whose forward made it ('' for
    the root's own); a node no fx node is (a chain's link, a module's copy) takes its
    neighbour's."""
    by_planned = {id(p): n for n, p in importer.planned.items()}
    out: dict[str, str] = {}
    last = ""
    pending: list[str] = []
    for item in importer.order:
        node = by_planned.get(id(item))
        if node is None:
            pending.append(item.id)
            continue
        if node.op in ("call_module", "get_attr"):
            scope = node.target.rpartition(".")[0]
        else:
            scope = _owner(node)
        for waiting in pending:  # a chain's links come before their node
            out[waiting] = scope
        pending.clear()
        out[item.id] = last = scope
    for waiting in pending:
        out[waiting] = last
    return out
