"""Values of a trace that are not tensors: constants, size expressions, aliases, probes.

The planner (`planner.Importer`) writes each non-tensor value of the traced graph as a
`_Constant`, a `_Sym` (a size expression of the inputs, read at run time) or an `_Alias`
(an element of a module's tuple result); the size checks of forward (`if H != W:`) become
expressions of the inputs' sizes (`_check_tree`) that the guards evaluate.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

TOLERANCE = 1e-5  # relative to the largest output value (at least 1)


@dataclass
class _Constant:
    value: Any


@dataclass
class _Sym:
    """A value computed from the sizes (or device) of tensors at run time: see _tree."""

    tree: Any


_NOT_SIZE = object()  # an argument size arithmetic cannot take


_WEIGHT_READ = object()  # a weight read only for its device, dtype or shape (no node)


def _reads_size(node) -> bool:
    """Whether an fx node reads only the size, dtype or device of its tensor."""
    return node.op == "call_function" and node.target is getattr and node.args[1] in (
        "device", "dtype", "shape", "ndim") or node.op == "call_method" and node.target in (
        "size", "dim")


SIZE_OPERATIONS = {operator.add: "add", operator.sub: "sub", operator.mul: "mul",
                   operator.floordiv: "floordiv", operator.truediv: "truediv",
                   operator.mod: "mod", operator.neg: "neg", operator.pow: "pow",
                   math.sqrt: "sqrt", operator.eq: "eq", operator.ne: "ne",
                   operator.lt: "lt", operator.le: "le", operator.gt: "gt", operator.ge: "ge"}


@dataclass
class Probe:
    """The trace run with some input dims doubled: each fx node's value there."""

    dims: list[tuple[int, int]]  # (input, dim) doubled
    sizes: list[tuple[int, ...]]  # the example inputs' shapes
    values: dict


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."


@dataclass
class _Alias:
    """An fx getitem that picks the output of a tuple-returning module (folded into it)."""

    node: Any


def _hashable(key) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


def _leaves(value: Any, kind: type) -> list:
    """The `kind` objects in a (nested) tuple, list or dict, in order."""
    if isinstance(value, kind):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = [getattr(value, f.name) for f in dataclasses.fields(value)]
    items = value.values() if isinstance(value, dict) else value if isinstance(
        value, tuple | list) else ()
    return [leaf for v in items for leaf in _leaves(v, kind)]


SIZE_READS = {"size", "shape", "ndim", "dim", "dtype", "device"}


def _check_tree(node, values: dict) -> Any:
    """A size check of the root's forward as an expression of its inputs' sizes (as
    `Importer._tree` writes them, with placeholders for tensors), or None."""
    args = node.args
    if node.op == "call_method" and node.target == "size" and args and \
            args[0].op == "placeholder":
        ndim = values[args[0]].ndim
        if len(args) == 1:
            return ("tuple", [("size", args[0], d) for d in range(ndim)])
        return ("size", args[0], args[1] % ndim) if isinstance(args[1], int) else None
    if node.op == "call_function" and node.target is getattr and args[1] == "shape" and \
            args[0].op == "placeholder":
        return ("tuple", [("size", args[0], d) for d in range(values[args[0]].ndim)])
    if node.op == "call_function" and node.target is operator.getitem:
        whole = _check_tree(args[0], values) if isinstance(args[0], torch.fx.Node) else None
        if isinstance(whole, tuple) and whole[0] == "tuple" and isinstance(args[1],
                                                                          int | slice):
            picked = whole[1][args[1]]
            return ("tuple", picked) if isinstance(picked, list) else picked
        return None
    name = SIZE_OPERATIONS.get(node.target) if node.op == "call_function" and _hashable(
        node.target) else None
    if name is None or node.kwargs:
        return None
    parts = []
    for a in args:
        part = _check_tree(a, values) if isinstance(a, torch.fx.Node) else \
            ("tuple", list(a)) if isinstance(a, tuple) and all(isinstance(v, int) for v in a) \
            else a if isinstance(a, int | float | bool) else None
        if part is None:
            return None
        parts.append(part)
    return ("op", name, parts)


def _tree_inputs(tree: Any) -> list:
    """The placeholders a check's expression reads, in order of first use."""
    found: list = []
    if isinstance(tree, tuple) and tree and tree[0] == "size":
        return [tree[1]]
    if isinstance(tree, tuple) and tree and tree[0] in ("tuple", "op"):
        for part in tree[-1]:
            found += [p for p in _tree_inputs(part) if p not in found]
    return found


def _tree_json(tree: Any, ports: list) -> Any:
    """A check's expression as the JSON of an opaque block whose inputs are `ports`."""
    if not isinstance(tree, tuple):
        return tree
    if tree[0] == "size":
        return {"size": [ports.index(tree[1]), tree[2]]}
    if tree[0] == "tuple":
        return {"tuple": [_tree_json(p, ports) for p in tree[1]]}
    return {"expr": [tree[1], *(_tree_json(p, ports) for p in tree[2])]}


def _sizes_only(node, values: dict) -> bool:
    """Whether `node` reads its inputs only through their sizes (shape, size(), ndim),
    never their values."""
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op == "call_method" and n.target in SIZE_READS or n.op == "call_function" and \
                n.target is getattr and n.args[1] in SIZE_READS:
            continue  # a size of a tensor: what it holds is not read
        if isinstance(values.get(n), torch.Tensor) or n.op in ("placeholder", "get_attr",
                                                               "call_module"):
            return False
        stack += n.all_input_nodes
    return True
