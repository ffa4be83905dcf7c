"""`nodegraph import module:Class`: a PyTorch module traced with torch.fx into a graph file.

`torch.fx` turns the module's `forward` into a list of calls. Each call becomes a node:
a submodule or function the library has a block for becomes that block, with its params
read from the module (a `nn.Linear` becomes ``layers.Linear`` with its `out_features`);
anything else becomes a clearly marked opaque block (`nodes.opaque`) that still runs — a
submodule by the import path of its class and its constructor arguments, a function by its
name and its extra arguments. The constructor arguments are *recorded* while the module is
built (see `export.record`); for a module given already built they are read back from its
attributes and checked, and when that fails the submodule is taken by path from a fresh
instance of the root class.

Sizes stay sizes: the trace is run again with the inputs' dims doubled (`probe`), and
every size that changes with them (`x.shape[2] // 2`, `arange(T, device=x.device)`,
`view(B, T, -1)`) is written as an expression the graph evaluates on its inputs (see
`nodes.opaque`), the rest as constants; a size with no expression is recorded with the
input sizes the import is valid for, and a guard node refuses the others. The module
hierarchy becomes nested groups (`fx_groups`), functional ops are named by their module.

The module's forward arguments become data blocks (`opaque.Arrays`) reading the example
inputs from an .npz beside the graph, so `nodegraph validate` and `info` infer every shape;
their `y` holds the module's own outputs. The weights go to a safetensors file beside the
graph, keyed ``node.param``; load them with `load_weights(compiled)`. Before anything is
written, the imported graph is compiled and must give the module's outputs.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import inspect
import linecache
import math
import operator
import tempfile
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.fx
from safetensors.torch import save_file
from torch import nn

from nodegraph.interop import fx_composite, fx_finish, fx_groups, fx_targets
from nodegraph.interop.export.record import Recorder
from nodegraph.interop.export.source import MAX_TENSOR_LITERAL, torch_path
from nodegraph.model import allowlist
from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph, Tie
from nodegraph.model.spec import default_registry, torch_functions, torch_modules
from nodegraph.runtime import referenced_weights as fx_weights

TOLERANCE = 1e-5  # relative to the largest output value (at least 1)
MAX_INPUTS = 8  # tensor inputs of an opaque block (nodes.opaque.INPUTS)
# values of a buffer written into the graph as a layers.Constant (and into the Python export
# as a literal); a module reading a larger one directly is kept whole
MAX_CONSTANT = MAX_TENSOR_LITERAL


# -- what a module maps to: the blocks' own torch declarations (`BlockSpec.torch`) ----------


@functools.cache
def _equivalents() -> tuple[dict[type, Any], dict[Any, list[Any]]]:
    """Module classes and functions to the blocks that declare them (default registry)."""
    registry = default_registry()
    return torch_modules(registry), torch_functions(registry)


def module_block(module: nn.Module) -> tuple[str, dict] | None:
    """The block (id, params) computing `module` exactly, if the library has one."""
    spec = _equivalents()[0].get(type(module))
    if spec is None:
        return None
    params = spec.torch.params(module)
    return None if params is None else (spec.id, params)


def function_blocks(fn: Any) -> list[Any]:
    """The blocks declaring `fn` (a function, or a Tensor method's name)."""
    return _equivalents()[1].get(fn, []) if _hashable(fn) else []


# -- one call of the traced graph as a node --------------------------------------------------


@dataclass
class Planned:
    """A node of the graph to be: block type, params, and which fx values feed its inputs."""

    id: str
    type: str
    params: dict[str, Any] = field(default_factory=dict)
    inputs: list[Any] = field(default_factory=list)  # fx nodes feeding ports in order
    weights: dict[str, torch.Tensor] = field(default_factory=dict)  # by param name


class Importer:
    """Turns one traced module into planned nodes."""

    def __init__(self, root: nn.Module, traced: torch.fx.GraphModule, values: dict,
                 recorder: Recorder | None, root_target: str | None, root_kwargs: dict):
        self.root, self.traced, self.values = root, traced, values
        self.recorder, self.root_target, self.root_kwargs = recorder, root_target, root_kwargs
        self.planned: dict[Any, Planned] = {}  # fx node -> its node
        self.symbols: dict[Any, Any] = {}  # fx node with a non-tensor value -> how to get it
        self.tuples: set[Any] = set()  # fx nodes returning tuples read element by element
        self.order: list[Planned] = []  # every planned node, inputs before their users
        self.extra: list[Planned] = []  # nodes planned before the next, that no fx node is
        self.probes: list[Probe] = []  # the trace run at other input sizes (see `probe`)
        self.fixed: dict[int, dict[int, int]] = {}  # input -> dim -> the only size it takes
        self.notes: list[str] = []  # what the import fixed, and where
        self.guards: dict[Any, str] = {}  # input placeholder -> the node checking its sizes
        self.after: list[Planned] = []  # nodes planned after the next (a module's copies)
        # (owner, user, the user's param, the owner's): one parameter in several blocks
        self.ties: list[tuple[Planned, Planned, str, str]] = []

    def plan(self) -> list[Planned]:
        for node in self.traced.graph.nodes:
            if node.op in ("placeholder", "output") or node in self.symbols or \
                    node in self.planned:  # (an element read of a module planned before)
                continue  # (a getitem folded into the module before it is in symbols)
            value = self.values.get(node)
            if self._tensors(node):  # x.chunk(2): each element read is one node
                continue
            if node.op == "call_function" and node.target is operator.getitem and \
                    node.args[0] in self.tuples:
                planned = self._opaque_function(node.args[0])
                # parts[-1]: the index counted from the front (the block's index is >= 0)
                count = len(self.values[node.args[0]])
                planned.id, planned.params["index"] = node.name, node.args[1] % count
                self.planned[node] = planned
                self.order.append(planned)
                continue
            if not isinstance(value, torch.Tensor) and node.op != "call_module":
                self.symbols[node] = self._symbol(node)
                continue
            if node.op == "get_attr" and node.users and all(
                    _reads_size(u) for u in node.users):  # weight.device, weight.dtype: no node
                self.symbols[node] = _WEIGHT_READ
                continue
            if self._identity(node):  # a no-op placeholder (timm's norm=Identity): no node
                source = node.args[0]
                alias = self.symbols.get(source)
                self.symbols[node] = alias if isinstance(alias, _Alias) else _Alias(source)
                continue
            planned = self._node(node)
            for item in self.extra:  # the head of a chain (a long concatenation)
                self.order.append(item)
            self.extra.clear()
            self.planned[node] = planned
            self.order.append(planned)
            self.order += self.after
            self.after.clear()
        self._name_by_scope()
        self._tie_shared()
        return self.order

    def _tie_shared(self) -> None:
        """One parameter used by several calls — a module called twice, or GPT's lm_head
        reusing the token embedding — is tied in the graph (the first call's owns it), so
        training moves them as the module does."""
        owner: dict[int, tuple[Planned, str]] = {}
        for node, planned in self.planned.items():
            if node.op != "call_module":
                continue
            prefix = "module." if planned.type == "opaque.Module" else ""
            for name, param in self.root.get_submodule(node.target).named_parameters():
                key = f"{prefix}{name}"
                if key not in planned.weights:
                    continue
                first = owner.setdefault(id(param), (planned, key))
                if first[0] is not planned:
                    self.ties.append((first[0], planned, key, first[1]))

    def _name_by_scope(self) -> None:
        """Functional ops named by the module whose forward made them and what they do
        (`layer1_0_add`, `attn_softmax`), not fx's `add_33`; a submodule's call keeps fx's
        name, its path. An id that is a method of nn.Module (`to`, `forward`) gets `_op`."""
        taken = {n.name for n in self.traced.graph.nodes if n.op in ("placeholder",
                                                                       "call_module")}
        for node, planned in self.planned.items():
            if node.op not in ("call_function", "call_method") or planned.id != node.name:
                continue
            # (a module path may hold any character: regnet's `block1-0`)
            scope = "".join(c if c.isalnum() or c == "_" else "_" for c in _owner(node))
            base = node.name.rstrip("0123456789").rstrip("_") or "op"
            name = f"{scope}_{base}" if scope else base
            if hasattr(nn.Module, name):
                name += "_op"
            candidate, count = name, 1
            while candidate in taken:
                count += 1
                candidate = f"{name}_{count}"
            taken.add(candidate)
            planned.id = candidate

    def scopes(self) -> dict[str, str]:
        """Planned node id -> the dotted path of the module whose forward made it ('' for
        the root's own); a node no fx node is (a chain's link, a module's copy) takes its
        neighbour's."""
        by_planned = {id(p): n for n, p in self.planned.items()}
        out: dict[str, str] = {}
        last = ""
        pending: list[str] = []
        for item in self.order:
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

    def _one_tensor(self, node) -> bool:
        return len(node.args) == 1 and not node.kwargs and self._is_tensor(node.args[0])

    def _identity(self, node) -> bool:
        """An nn.Identity called on one tensor (not a --leaf the user asked for)."""
        return node.op == "call_module" and len(node.args) == 1 and not node.kwargs and \
            type(self.root.get_submodule(node.target)) is nn.Identity and \
            self._is_tensor(node.args[0])

    def _tensors(self, node) -> bool:
        """True (and noted) when a function or method returns a tuple of tensors whose
        elements forward reads one by one (chunk, split, unbind)."""
        value = self.values.get(node)
        if node.op not in ("call_function", "call_method") or not isinstance(
                value, tuple | list) or not value or not all(
                isinstance(v, torch.Tensor) for v in value):
            return False
        if not all(u.op == "call_function" and u.target is operator.getitem and
                   isinstance(u.args[1], int) for u in node.users):
            raise NodegraphError(f"'{node.name}' ({_describe(node)}) returns {len(value)} "
                                 "tensors and forward uses them together; a block passes "
                                 "one tensor per output (pick them one by one: a, b = ...)")
        self.tuples.add(node)
        return True

    # -- values that are not tensors: sizes and constants --------------------------------

    def _symbol(self, node) -> Any:
        """How a non-tensor value is computed: a `_Sym` (a size expression of the inputs read
        at run time) where it is arithmetic on a size the probes change, else a `_Constant`
        where it is the same at every input size the probes tried. A value that changes with
        the input but has no expression fixes the input sizes it follows (recorded;
        validation refuses other sizes)."""
        value = self.values.get(node)
        if node.op == "call_module" or isinstance(value, torch.Tensor):
            return value
        tree = self._tree(node)
        if isinstance(tree, tuple) and tree[0] == "device":
            return _Sym(tree)
        if tree is not None and _tree_inputs(tree):  # it reads a size the probes change:
            return _Sym(tree)  # an expression even where the probes agree ((7 - W % 7) % 7 is
        # 0 at W = 14 and at 28, the doubled probe, but 1 at W = 20: davit's window padding)
        changed = [probe for probe in self.probes if not _same(probe.values.get(node), value)]
        if not changed:
            return _Constant(value)
        if tree is not None:
            return _Sym(tree)
        for probe in changed:  # no expression for it: the sizes it follows stay as they are
            for i, dim in probe.dims:
                self.fixed.setdefault(i, {})[dim] = int(probe.sizes[i][dim])
        self.notes.append(f"'{node.name}' ({_describe(node)}){_line(node)} computes "
                          f"{_short(value)} from the input's size in a way a graph cannot "
                          "follow; the import is valid for the example's size only there")
        return _Constant(value)

    def _tree(self, node) -> Any:
        """The size expression an fx node computes, from sizes of tensors and constants:
        ("size", tensor, dim), ("device", tensor), ("tuple", [...]) or ("op", name, [...]);
        None when it is not size arithmetic."""
        target, args = node.target, node.args
        if node.op == "call_method" and target == "size" and self._is_tensor(args[0]):
            dim = args[1] if len(args) > 1 else node.kwargs.get("dim")
            dim = self._const(dim)
            return self._shape(args[0]) if dim is None else self._dim(args[0], dim) \
                if isinstance(dim, int) else None
        if node.op == "call_function" and target is getattr and self._is_tensor(args[0]):
            if args[1] == "shape":
                return self._shape(args[0])
            if args[1] == "device":
                return ("device", args[0])
            return None
        if node.op == "call_function" and target is getattr and args[1] == "device" and \
                self.symbols.get(args[0]) is _WEIGHT_READ:  # the graph's device: an input's
            first = next((n for n in self.traced.graph.nodes if n.op == "placeholder"), None)
            return ("device", first) if first is not None else None
        if node.op == "call_function" and target is operator.getitem:
            whole = self._part(args[0])
            if isinstance(whole, tuple) and whole[0] == "tuple":
                index = self._const(args[1])
                if isinstance(index, int) or isinstance(index, slice) and all(
                        isinstance(v, int | None) for v in (index.start, index.stop,
                                                            index.step)):
                    picked = whole[1][index]
                    return ("tuple", picked) if isinstance(picked, list) else picked
            return None
        name = SIZE_OPERATIONS.get(target) if node.op == "call_function" and _hashable(
            target) else None
        if name is None or node.kwargs:
            return None
        parts = [self._part(a) for a in args]
        if any(p is _NOT_SIZE for p in parts):
            return None
        return ("op", name, parts)

    def _part(self, value) -> Any:
        """An argument of size arithmetic as a tree (a constant as itself)."""
        if isinstance(value, torch.fx.Node):
            symbol = self.symbols.get(value)
            if isinstance(symbol, _Sym):
                return symbol.tree
            if isinstance(symbol, _Constant):
                whole = symbol.value
                return ("tuple", list(whole)) if isinstance(whole, tuple) else whole
            return _NOT_SIZE
        if isinstance(value, tuple | list):  # x.shape[:2] + (-1, 2)
            parts = [self._part(v) for v in value]
            return _NOT_SIZE if any(p is _NOT_SIZE for p in parts) else ("tuple", parts)
        return value if isinstance(value, int | float | bool | type(None)) else _NOT_SIZE

    def _shape(self, tensor) -> tuple:
        return ("tuple", [self._dim(tensor, d) for d in range(self.values[tensor].ndim)])

    def _dim(self, tensor, dim: int) -> Any:
        """The size of `tensor` in `dim`: a number where the probes never change it."""
        ndim = self.values[tensor].ndim
        if not -ndim <= dim < ndim:
            return None
        size = self.values[tensor].shape[dim]
        if all(isinstance(p.values.get(tensor), torch.Tensor) and
               p.values[tensor].shape[dim] == size for p in self.probes):
            return size
        return ("size", tensor, dim % ndim)

    # -- calls ---------------------------------------------------------------------------

    def _node(self, node) -> Planned:
        if node.op == "get_attr":
            return self._attribute(node)
        if node.op == "call_module":
            module = self.root.get_submodule(node.target)
            mapped = module_block(module)
            if mapped is not None and self._maps_call(node, module):
                block, params = mapped
                if not isinstance(self.values[node], torch.Tensor):
                    for user in node.users:  # out, _ = lstm(x): `out` is the block's output
                        self.symbols[user] = _Alias(node)
                return Planned(node.name, block, params, [node.args[0]],
                               dict(module.state_dict()))
            links = fx_composite.chain(module, module_block) if isinstance(
                self.values[node], torch.Tensor) and self._one_tensor(node) else None
            if links:  # timm's BatchNormAct2d, LayerNorm2d: a chain of blocks
                source: Any = node.args[0]
                for i, (block, params, weights) in enumerate(links):
                    last = i == len(links) - 1
                    link = Planned(node.name if i == 0 else f"{node.name}_{i}", block,
                                   params, [source], dict(weights))
                    if not last:
                        self.extra.append(link)
                    source = link
                return link
            return self._opaque_module(node, module)
        fn = node.target
        tensors = [a for a in node.args if self._is_tensor(a)]
        constants = [a for a in node.args if not self._is_tensor(a)]
        for spec in function_blocks(fn):  # a function or a method's name
            arity = sum(not port.optional for port in spec.inputs)
            if len(tensors) != arity or tuple(node.args[:arity]) != tuple(tensors) or \
                    not self._constant_args(constants, node.kwargs):
                continue
            made = spec.torch.call([self._const(c) for c in constants],
                                   {k: self._const(v) for k, v in node.kwargs.items()})
            if made is not None and self._fits(spec.id, made, node):
                return Planned(node.name, spec.id, _json(made), tensors)
        reshaped = self._reshape(node)
        if reshaped is not None:
            return reshaped
        if fn in (torch.cat, torch.concat) and isinstance(node.args[0], list | tuple) and \
                all(self._is_tensor(a) for a in node.args[0]) and len(node.args[0]) >= 2:
            dim = self._const(node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0))
            if isinstance(dim, int) and dim % self.values[node].ndim != 0:
                return self._concat(node, list(node.args[0]), dim)
        return self._opaque_function(node)

    def _maps_call(self, node, module: nn.Module) -> bool:
        """Whether this call of a module the library has a block for computes the block:
        its one tensor (or that tensor as often as `module_call` allows, with constant
        keywords), and of a tuple result only the first element read."""
        args, fits = node.args, _equivalents()[0][type(module)].torch.module_call
        if not args or any(a is not args[0] for a in args) or not self._is_tensor(args[0]) \
                or not self._constant_args([], node.kwargs):
            return False
        kwargs = {k: self._const(v) for k, v in node.kwargs.items()}
        if not (fits(len(args), kwargs) if fits else len(args) == 1 and not kwargs):
            return False
        if isinstance(self.values[node], torch.Tensor):
            return True
        return bool(node.users) and all(u.op == "call_function" and u.target is
                                        operator.getitem and u.args[1] == 0
                                        for u in node.users)

    def _concat(self, node, parts: list, dim: int) -> Planned:
        """torch.cat of any number of tensors: layers.Concat joins up to 8, so longer lists
        become a chain, each Concat taking the one before as its first part."""
        first, rest = parts[:8], parts[8:]
        planned, n = Planned(node.name if not rest else f"{node.name}_part0", "layers.Concat",
                             {"dim": dim}, first), 0
        while rest:
            self.extra.append(planned)
            n += 1
            chunk, rest = rest[:7], rest[7:]
            planned = Planned(node.name if not rest else f"{node.name}_part{n}", "layers.Concat",
                              {"dim": dim}, [planned, *chunk])
        return planned

    def _fits(self, block: str, params: dict, node) -> bool:
        """Blocks keep the batch dim first: Flatten may not start at dim 0."""
        if block == "layers.Flatten":
            return params["start_dim"] % self.values[node.args[0]].ndim != 0
        return True

    def _reshape(self, node) -> Planned | None:
        """x.view(x.size(0), ...) / x.reshape(-1, ...) keeping the batch: layers.Reshape;
        x.permute(0, ...): layers.Permute."""
        if node.op != "call_method" or not node.args or not self._is_tensor(node.args[0]):
            return None
        source, rest = node.args[0], list(node.args[1:])
        if len(rest) == 1 and isinstance(rest[0], tuple | list):
            rest = list(rest[0])
        if node.kwargs or not rest:
            return None
        before = self.values[source].shape
        first = self._const(rest[0])
        if node.target in ("view", "reshape") and self._keeps_batch(source, node) and (
                first == -1 or isinstance(first, _Sym) and first.tree[0] == "size" and
                first.tree[2] == 0):  # x.view(B, ...) / x.view(-1, ...): the batch kept
            shape = [self._const(r) for r in rest[1:]]
            free = [i for i, r in enumerate(shape) if isinstance(r, _Sym) and
                    r.tree[0] in ("size", "op")]
            if len(free) == 1 and -1 not in shape:  # the one size that follows the input
                shape[free[0]] = -1
            if all(isinstance(r, int) and not isinstance(r, bool) for r in shape):
                return Planned(node.name, "layers.Reshape", {"shape": shape}, [source])
        if node.target == "permute" and all(isinstance(self._const(r), int) for r in rest):
            dims = [self._const(r) % len(before) for r in rest]
            if dims[0] == 0:
                return Planned(node.name, "layers.Permute", {"dims": dims[1:]}, [source])
        return None

    def _keeps_batch(self, source, node) -> bool:
        """Whether a reshape keeps dim 0 of its input at every size the probes tried."""
        runs = [self.values, *(p.values for p in self.probes)]
        return all(isinstance(r.get(node), torch.Tensor) and r[node].ndim and
                   r[source].ndim and r[node].shape[0] == r[source].shape[0] for r in runs)

    def _attribute(self, node) -> Planned:
        value = self.values[node]
        param = isinstance(self._owner_attr(node.target), nn.Parameter)
        if param:
            return Planned(node.name, "layers.Parameter",
                           {"shape": list(value.shape), "init": "zeros"}, [],
                           {"value": value.detach().clone()})
        if value.numel() > MAX_CONSTANT:  # stored with the weights, not in the JSON
            return Planned(node.name, "opaque.Buffer", {
                "shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")},
                [], {"value": value.detach().clone()})
        dtype = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64",
                 torch.bool: "bool"}.get(value.dtype)
        if dtype is None:
            raise NodegraphError(f"'{node.target}' is a {value.dtype} buffer used directly in "
                                 "forward; the graph's constants hold float, int64 or bool")
        return Planned(node.name, "layers.Constant", {"value": value.tolist(), "dtype": dtype})

    def _owner_attr(self, target: str) -> Any:
        owner, _, name = target.rpartition(".")
        return getattr(self.root.get_submodule(owner) if owner else self.root, name)

    def _opaque_module(self, node, module: nn.Module) -> Planned:
        inputs: list[Any] = []
        call_args = None
        if all(self._is_tensor(a) for a in node.args):
            inputs = list(node.args)
        else:  # lstm(x, (h, c)): the tensors are inputs, the structure a param
            call_args = self._structure(list(node.args), inputs, node, module)
        tensor_kwargs = [k for k, v in node.kwargs.items() if self._is_tensor(v)]
        if len(inputs) > MAX_INPUTS or tensor_kwargs or not self._constant_args([],
                                                                              node.kwargs):
            raise NodegraphError(f"'{node.target}' ({type(module).__name__}){_line(node)} is "
                                 f"called with other arguments than up to {MAX_INPUTS} "
                                 "tensors (alone or in tuples) and constant keyword "
                                 "arguments; a graph cannot pass them (keep the module "
                                 "that calls it whole with --leaf, or pass tensors)")
        params = self._construction(node.target, module)
        if node.kwargs:  # need_weights=False: fixed for every call
            params["call_kwargs"] = _json({k: self._const(v) for k, v in node.kwargs.items()})
        if call_args is not None:
            params["call_args"] = call_args
        weights = {f"module.{k}": v for k, v in module.state_dict().items()}
        paths = self._paths_read(node)
        if not paths:
            return Planned(node.name, "opaque.Module", params, inputs, weights)
        planned = None
        for path, leaves in paths.items():
            picked = {**params, "index": path[0], **({"pick": list(path[1:])} if path[1:]
                                                     else {})}
            if planned is None:  # the first element read: this node
                planned = Planned(node.name, "opaque.Module", picked, inputs, weights)
                source = node
            else:  # each other element: the same module again, its weights tied to it
                copy = Planned(f"{node.name}_{'_'.join(map(str, path))}", "opaque.Module",
                               picked, inputs, weights)
                self.planned[leaves[0]] = copy
                self.after.append(copy)
                self.ties += [(planned, copy, f"module.{name}", f"module.{name}")
                              for name, _ in module.named_parameters()]
                source = leaves[0]
            for leaf in leaves if source is node else leaves[1:]:  # the same element again
                self.symbols[leaf] = _Alias(source)
        assert planned is not None
        return planned

    def _structure(self, value: Any, inputs: list, node, module: nn.Module) -> Any:
        """A call's arguments as JSON: tensors as {"input": k} (k-th of `inputs`), tuples
        and lists of them kept, constants as they are."""
        if isinstance(value, torch.fx.Node):
            if self._is_tensor(value):
                if value not in inputs:
                    inputs.append(value)
                return {"input": inputs.index(value)}
            if isinstance(self.symbols.get(value), _Constant):
                return _json(self.symbols[value].value)
            raise NodegraphError(f"'{node.target}' ({type(module).__name__}){_line(node)} is "
                                 f"passed '{value.name}', which is neither a tensor nor a "
                                 "constant; keep the module that calls it whole with --leaf")
        if isinstance(value, tuple):
            return {"tuple": [self._structure(v, inputs, node, module) for v in value]}
        if isinstance(value, list):
            return [self._structure(v, inputs, node, module) for v in value]
        return _json(value)

    def _paths_read(self, node) -> dict[tuple[int, ...], list[Any]]:
        """For a module returning a (nested) tuple: each element forward reads, as its
        index path, and the fx getitems that read it (`_, (h, c) = lstm(x)`: (1, 0) and
        (1, 1)); empty for a tensor result."""
        if isinstance(self.values[node], torch.Tensor):
            return {}
        found: dict[tuple[int, ...], list[Any]] = {}

        def walk(parent, prefix: tuple[int, ...]) -> None:
            value = self.values[parent]
            users = list(parent.users)
            if not users or any(u.op != "call_function" or u.target is not operator.getitem
                                or not isinstance(u.args[1], int) for u in users):
                raise NodegraphError(f"'{node.target}'{_line(node)} returns several values "
                                     "and forward uses them whole; a block passes tensors "
                                     "(unpack them: out, (h, c) = lstm(x))")
            for user in users:
                path = (*prefix, user.args[1] % len(value))
                if isinstance(self.values.get(user), torch.Tensor):
                    found.setdefault(path, []).append(user)
                else:
                    self.symbols[user] = _Alias(node)  # a tuple on the way (h, c)
                    walk(user, path)

        walk(node, ())
        return found

    def _construction(self, path: str, module: nn.Module) -> dict[str, Any]:
        """How an opaque block builds this submodule: its class and recorded arguments,
        else arguments read back from it, else the root class and the path."""
        call = self.recorder.get(module) if self.recorder is not None else None
        target = _import_path(type(module))
        if call is not None and target is not None:
            kwargs = _kwargs(call.cls, call.args, call.varkw)
            if kwargs is not None and call.varargs:  # nn.LSTM(16, 32): LSTM(*args, **kw)
                try:
                    kwargs = {"*": _json(list(call.varargs)), **kwargs}
                except NodegraphError:
                    kwargs = None
            if kwargs is not None:
                return {"target": target, "kwargs": kwargs}
        if target is not None:
            kwargs = _kwargs_from_attributes(module)
            if kwargs is not None and _rebuilds(target, kwargs, "", module):
                return {"target": target, "kwargs": kwargs}
        if self.root_target is not None and _rebuilds(self.root_target, self.root_kwargs, path,
                                                      module):
            return {"target": self.root_target, "kwargs": self.root_kwargs, "path": path}
        raise NodegraphError(f"cannot tell how to build '{path}' ({type(module).__name__}): "
                             "import the class (module:Class) rather than a built instance, "
                             "so its construction can be recorded")

    def _opaque_function(self, node) -> Planned:
        inputs: list[Any] = []

        def encode(value):
            if isinstance(value, torch.fx.Node):
                symbol = self.symbols.get(value)
                if isinstance(symbol, _Alias):
                    value, symbol = symbol.node, None
                if isinstance(symbol, _Constant):
                    return _json(symbol.value)
                if isinstance(symbol, _Sym):
                    return tree(symbol.tree)
                return {"input": port(value)}
            if isinstance(value, tuple):
                return {"tuple": [encode(v) for v in value]}
            if isinstance(value, list):
                return [encode(v) for v in value]
            if isinstance(value, dict):
                return {k: encode(v) for k, v in value.items()}
            if isinstance(value, slice):
                return {"slice": [encode(value.start), encode(value.stop), encode(value.step)]}
            if value is Ellipsis:
                return {"ellipsis": True}
            if isinstance(value, torch.dtype):
                return {"dtype": str(value).removeprefix("torch.")}
            return _json(value)

        def tree(part):
            if not isinstance(part, tuple):
                return _json(part)
            if part[0] == "size":
                return {"size": [port(part[1]), part[2]]}
            if part[0] == "device":
                return {"device": port(part[1])}
            if part[0] == "tuple":
                return {"tuple": [tree(p) for p in part[1]]}
            return {"expr": [part[1], *(tree(p) for p in part[2])]}

        def port(tensor) -> int:
            if tensor not in inputs:
                inputs.append(tensor)
            return inputs.index(tensor)

        args, kwargs = encode(list(node.args)), encode(dict(node.kwargs))
        if len(inputs) > MAX_INPUTS:
            raise NodegraphError(f"'{node.name}' ({_describe(node)}) takes {len(inputs)} "
                                 f"tensors; an opaque function block takes up to {MAX_INPUTS}")
        return Planned(node.name, "opaque.Function",
                       {"function": _function_path(node), "args": args, "kwargs": kwargs},
                       inputs)

    # -- helpers -------------------------------------------------------------------------

    def _is_tensor(self, value) -> bool:
        if not isinstance(value, torch.fx.Node):
            return False
        symbol = self.symbols.get(value)
        if isinstance(symbol, _Alias):
            return True
        return value in self.planned or isinstance(self.values.get(value), torch.Tensor) and \
            value not in self.symbols

    def _constant_args(self, args: list, kwargs: dict) -> bool:
        return all(self._is_constant(v) for v in [*args, *kwargs.values()])

    def _is_constant(self, value) -> bool:
        if isinstance(value, torch.fx.Node):
            return isinstance(self.symbols.get(value), _Constant)
        return isinstance(value, int | float | str | bool | type(None))

    def _const(self, value) -> Any:
        if isinstance(value, torch.fx.Node):
            symbol = self.symbols.get(value)
            return symbol.value if isinstance(symbol, _Constant) else symbol
        return value


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


def _line(node) -> str:
    """' at file:line (`code`)': the user's line that made an fx node, where recorded."""
    lines = (node.meta.get("stack_trace") or "").splitlines()
    for i, text in enumerate(lines):
        text = text.strip()
        if text.startswith("File ") and "/torch/" not in text.replace("\\", "/") and \
                "nodegraph/interop" not in text:
            parts = text.split('"')
            where = Path(parts[1]).name if len(parts) > 2 else "?"
            number = text.split("line ")[-1].split(",")[0]
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            return f" at {where}:{number} (`{code}`)"
    return ""


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


def _describe(node) -> str:
    return f"{node.target}" if node.op == "call_method" else getattr(
        node.target, "__name__", str(node.target))


ALIASES = {"F": "torch.nn.functional", "nn": "torch.nn", "nn.init": "torch.nn.init"}


def callable_path(fn: Any) -> str | None:
    """``module:qualname`` of a torch, operator or math function (torch's public name)."""
    path = torch_path(fn)
    if path is not None:
        head, _, name = path.rpartition(".")
        if head == "torch.Tensor":
            return f"torch:Tensor.{name}"
        return f"{ALIASES.get(head, head)}:{name}"
    module = getattr(fn, "__module__", None) or ""
    if module in ("_operator", "operator", "math"):
        return f"{module.lstrip('_')}:{fn.__name__}"
    return None


def _function_path(node) -> str:
    if node.op == "call_method":
        return f"torch:Tensor.{node.target}"
    path = callable_path(node.target)
    if path is not None:
        return path
    fn, module = node.target, getattr(node.target, "__module__", "")
    raise NodegraphError(f"'{node.name}' calls {module}.{getattr(fn, '__qualname__', fn)}, "
                         "which is not part of torch: trace a module whose forward calls "
                         "torch only, or wrap that call in a submodule")


def _import_path(cls: type) -> str | None:
    """``module:QualName`` by which `cls` can be imported again (torch's public path)."""
    path = callable_path(cls)
    if path is not None:
        return path
    if "<locals>" in cls.__qualname__ or cls.__module__ == "__main__":
        return None
    return f"{cls.__module__}:{cls.__qualname__}"


def _json(value: Any) -> Any:
    """`value` as JSON, or an error naming what JSON cannot hold."""
    if isinstance(value, tuple | list):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):  # masked_fill(m, -inf)
        return {"float": str(value)}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if callable(value) and callable_path(value) is not None:
        return {"function": callable_path(value)}
    raise NodegraphError(f"a {type(value).__name__} argument cannot be written to a graph "
                         "file")


def _kwargs(cls: Callable[..., Any], args: dict, varkw: dict) -> dict | None:
    """Recorded constructor arguments as JSON, those equal to their default left out."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return None
    out = {}
    for name, value in {**args, **varkw}.items():
        param = signature.parameters.get(name)
        if param is not None and param.default is not param.empty:
            try:
                if value is param.default or bool(value == param.default):
                    continue
            except Exception:
                pass
        try:
            out[name] = _json(value)
        except NodegraphError:
            return None
    return out


def _kwargs_from_attributes(module: nn.Module) -> dict | None:
    """Constructor arguments read back from same-named attributes (checked afterwards)."""
    try:
        signature = inspect.signature(type(module))
    except (TypeError, ValueError):
        return None
    out = {}
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name in ("device",
                                                                                "dtype"):
            continue
        attribute = getattr(module, name, None)
        if hasattr(module, name) and not isinstance(attribute, nn.Module | torch.Tensor):
            try:
                out[name] = _json(getattr(module, name))
            except NodegraphError:
                return None
        elif param.default is param.empty:
            return None
    return out


def _rebuilds(target: str, kwargs: dict, path: str, module: nn.Module) -> bool:
    """True when the opaque block's recipe builds a module that takes `module`'s weights
    and has its submodules (built through the block's declaration, as a graph would build
    it)."""
    spec = default_registry().get("opaque.Module")
    try:  # the class is the live module's own, already imported by the user: trusted
        params, problems = spec.resolve_params({"target": target, "kwargs": kwargs,
                                                "path": path})
        if problems:
            return False
        with allowlist.trusting(allowlist.trusted_now() | {allowlist.module_of(target)}):
            built = spec.build(params, {}).module
        built.load_state_dict(module.state_dict())
        # the same submodules too: an activation has no weights to tell timm's
        # BatchNormAct2d(act_layer=GELU) from the ReLU its attributes rebuild
        return type(built) is type(module) and repr(built) == repr(module)
    except Exception:
        return False


# -- tracing -----------------------------------------------------------------------------------


class _Tracer(torch.fx.Tracer):
    """torch.fx's tracer, keeping every module the library maps, every torch.nn module (a
    TransformerEncoderLayer is one opaque block), every subclass of a torch.nn layer that
    another library extends (timm's BatchNormAct2d: its weights stay one module's) and the
    modules named in `leaves` as one call."""

    def __init__(self, leaves: frozenset[str] = frozenset(), examples: tuple | None = None):
        super().__init__()
        self.leaves = leaves
        self.examples = examples  # the example inputs: a size check is evaluated on them
        self.checks: list[str] = []  # the size checks taken at trace time, where and how
        # each as (its expression on the inputs' sizes or None, its outcome, where)
        self.check_trees: list[tuple[Any, bool, str]] = []
        self.record_stack_traces = True  # messages name the user's line (see _line)
        # self.mask[:, :T]: a buffer read in forward is a node, sliced by a size that follows
        # (not in the cautious retry, see import_graph)
        self.proxy_buffer_attributes = not _CAUTIOUS.get()
        self._values: dict | None = {}  # the graph's values on the examples (see _evaluate)
        self._runner: torch.fx.Interpreter | None = None

    def to_bool(self, obj) -> bool:
        """`if H != W:` / `if x.shape[-2:] != y.shape[-2:]` on sizes: decided on the example
        inputs and recorded (the probes then hold the trace to the module at other sizes,
        so a size that takes the other branch is refused). A condition on tensor values
        stays an error."""
        if self.examples is None or not isinstance(obj, torch.fx.Proxy) or _owner(obj.node):
            return super().to_bool(obj)  # (a submodule's check keeps that module whole)
        values = self._evaluate(obj.node)
        if values is None or not _sizes_only(obj.node, values):
            return super().to_bool(obj)
        outcome = bool(values[obj.node])
        where = _line(obj.node).removeprefix(" at ") or obj.node.name
        self.checks.append(f"{where}: {outcome} on the example")
        self.check_trees.append((_check_tree(obj.node, values), outcome, where))
        return outcome

    def iter(self, obj) -> Any:
        """`for size in x.shape[-2:]` (RAFT's `any(s < m for s in fmap.shape[-2:])`): a
        shape has as many entries at every size, so it is iterated entry by entry, each
        still a size of the trace; anything else stays fx's error."""
        values = self._evaluate(obj.node) if self.examples is not None and isinstance(
            obj, torch.fx.Proxy) else None
        if values is None or not isinstance(values.get(obj.node), torch.Size):
            return super().iter(obj)
        return iter([obj[i] for i in range(len(values[obj.node]))])

    def _evaluate(self, node) -> dict | None:
        """Each value of the graph traced so far, up to `node`, on the example inputs (None
        where it does not run). Values already computed for an earlier check are kept, and
        only the nodes traced since run: RAFT's forward checks sizes in each of its 12
        refinement steps, and running the whole prefix again for each took minutes."""
        examples = self.examples
        if self._values is None or examples is None:
            return None  # (a node before failed: it fails again, as each run is the same)
        if self._runner is None or self._runner.graph is not self.graph:
            self._runner = torch.fx.Interpreter(self.root, garbage_collect_values=False,
                                                graph=self.graph)
            self._values.clear()
        runner, values = self._runner, self._values
        placeholders = 0
        try:
            with torch.no_grad(), _untraced():
                for n in self.graph.nodes:
                    if n.op == "placeholder":
                        if n not in values:
                            if placeholders < len(examples):
                                values[n] = examples[placeholders]
                            elif n.args:  # an argument left at its default
                                values[n] = n.args[0]
                            else:
                                return None
                        placeholders += 1
                    elif n not in values:
                        runner.env = values
                        values[n] = runner.run_node(n)
                    if n is node:
                        return values
        except Exception:
            self._values = None
            return None
        return None

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        # (the class only: reading the module's attributes here would add them to the trace)
        return type(m) in _equivalents()[0] or qualname in self.leaves or isinstance(
            m, EXTENDED) or _train_only(type(m)) and not any(  # type: ignore[arg-type]
            True for _ in m.children()) or super().is_leaf_module(m, qualname)
        # (the ignore: torch's Module.__hash__ stub makes mypy think a class unhashable)


@contextlib.contextmanager
def _untraced():
    """nn.Module's own __call__ and __getattr__ while fx traces: fx patches them for the
    trace, so a submodule run for a size check would hand back proxies (a leaf's call, a
    weight) instead of tensors, and the check would recurse into itself (RAFT's checks)."""
    from torch.fx import _symbolic_trace as fx_trace

    saved = nn.Module.__call__, nn.Module.__getattr__
    call = getattr(fx_trace, "_orig_module_call", saved[0])
    getattr_ = getattr(fx_trace, "_orig_module_getattr", saved[1])
    nn.Module.__call__, nn.Module.__getattr__ = call, getattr_  # type: ignore[method-assign]
    try:
        yield
    finally:
        nn.Module.__call__, nn.Module.__getattr__ = saved  # type: ignore[method-assign]


@functools.cache
def _train_only(cls: type[nn.Module]) -> bool:
    """True when `cls.forward` reads `self.training` (timm's DropPath, a dropout of one's
    own): traced in eval mode it would vanish, so a childless one stays a module whose
    train/eval difference survives."""
    try:
        return "self.training" in inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return False


# torch.nn layers whose subclasses elsewhere keep their weights and state in one module
EXTENDED = (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm, nn.Linear,
            nn.modules.conv._ConvNd)


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


def trace(module: nn.Module, leaves: Iterable[str] = (),
          inputs: int | None = None, examples: tuple | None = None) -> torch.fx.GraphModule:
    """The fx graph of `module`, or an error naming the construct fx cannot follow.

    Submodules named in `leaves` stay one call. So does, found by tracing again, a
    submodule whose forward calls a function outside torch that fx does not enter (one
    marked with `torch.fx.wrap`, as torchvision's stochastic_depth) or whose control flow
    depends on tensor values: such a module becomes one opaque block."""
    leaves = set(leaves)
    names = dict(module.named_modules())
    unknown = [leaf for leaf in leaves if leaf not in names]
    if unknown:
        raise NodegraphError(f"--leaf {unknown[0]}: {type(module).__name__} has no submodule "
                             f"of that name (e.g. {', '.join(list(names)[1:4])})")
    concrete = _defaults_after(module, inputs)
    for _ in range(len(names) + 1):
        try:
            tracer = _Tracer(frozenset(leaves), examples)
            graph = tracer.trace(module, concrete_args=concrete)
        except Exception as e:
            owner = _failing_module(e, module)
            if owner and owner not in leaves:
                leaves.add(owner)
                continue
            raise _trace_error(module, e) from None
        outside = {_owner(n) for n in graph.nodes if n.op == "call_function"
                   and callable_path(n.target) is None and _owner(n) and (getattr(
                       n.target, "__module__", None) or "").split(".")[0] not in (
                       "torch", "builtins", "_operator", "operator", "math")}
        # a tensor made while tracing (fx's `_tensor_constantN`, timm swin's relative
        # position index): kept inside the module whose forward made it
        if _CAUTIOUS.get():  # a module reading a big buffer whole, as before issue #26
            outside |= {n.target.rpartition(".")[0] for n in graph.nodes if n.op ==
                        "get_attr" and "." in n.target and _big_buffer(module, n.target)}
        outside |= {_owner(n) for n in graph.nodes if n.op == "get_attr" and "." not in
                    n.target and _owner(n) and _big_buffer(module, n.target)}
        if not outside - leaves:
            break
        leaves |= outside
    traced = torch.fx.GraphModule(module, graph)
    traced.meta["size_checks"] = tracer.checks
    traced.meta["size_check_trees"] = tracer.check_trees
    _plain_outputs(traced.graph)
    traced.graph.eliminate_dead_code()  # an unused tuple element (`out, _ = lstm(x)`)
    traced.recompile()
    return traced


def _plain_outputs(graph: torch.fx.Graph) -> None:
    """A named tuple returned by forward (torchvision's GoogLeNetOutputs while training), or
    a dataclass, becomes the plain tuple of its fields: each one an output of the graph."""
    [output] = [n for n in graph.nodes if n.op == "output"]
    value = output.args[0]
    if not isinstance(value, torch.fx.Node) or value.op != "call_function" or not isinstance(
            value.target, type) or len(value.users) != 1:
        return
    if issubclass(value.target, tuple) and hasattr(value.target, "_fields"):
        names = list(value.target._fields)
    elif dataclasses.is_dataclass(value.target):  # return Output(logits=..., hidden=...)
        names = [f.name for f in dataclasses.fields(value.target)]
    else:
        return
    fields = list(value.args) + [value.kwargs[f] for f in names[len(value.args):]
                                 if f in value.kwargs]
    output.args = (tuple(fields),)
    graph.erase_node(value)


def _with_training_outputs(root: nn.Module, traced: torch.fx.GraphModule, leaves: Iterable[str],
                           inputs: tuple) -> tuple[torch.fx.GraphModule, int]:
    """The trace with the heads only training computes, and how many outputs they add.

    Traced in eval mode, a model whose forward runs some submodules only `if
    self.training` (googlenet's and inception's auxiliary classifiers) loses them and their
    weights. When the eval trace leaves weights unused and a trace in training mode uses
    them, that trace is taken instead: its extra outputs (after the eval ones, as
    torchvision's GoogLeNetOutputs puts them) become outputs of the graph, so a training
    step trains them too, and in eval mode the graph's first outputs are the module's. A
    submodule that itself reads `self.training` stays one block there, so its own
    train/eval difference survives. Where the training trace's first outputs are not the
    eval trace's outputs in eval mode (training changes the main path), the eval trace is
    kept."""
    unused = _unused_weights(root, traced)
    if not unused:
        return traced, 0
    reads = {name for name, m in root.named_modules()
             if name and _reads_training(type(m))}  # type: ignore[arg-type]
    root.train()
    try:
        trained = trace(root, set(leaves) | reads, len(inputs), inputs)
    except NodegraphError:
        return traced, 0
    finally:
        root.eval()
    if len(_unused_weights(root, trained)) >= len(unused):
        return traced, 0
    try:
        with torch.no_grad():
            before = _leaves(traced(*inputs), torch.Tensor)
            after = _leaves(trained(*inputs), torch.Tensor)
    except Exception:
        return traced, 0
    extra = len(after) - len(before)
    same = all(a.shape == b.shape and torch.allclose(a, b, rtol=1e-6, atol=1e-6)
               for a, b in zip(before, after, strict=False))
    return (trained, extra) if extra > 0 and same else (traced, 0)


def _unused_weights(root: nn.Module, traced: torch.fx.GraphModule) -> set[str]:
    """Names of `root`'s parameters that no call or attribute of the trace reaches."""
    used = [n.target for n in traced.graph.nodes if n.op in ("call_module", "get_attr")]
    return {name for name, _ in root.named_parameters()
            if not any(name == u or name.startswith(u + ".") for u in used)}


@functools.cache
def _reads_training(cls: type[nn.Module]) -> bool:
    """True when a module class (not torch's own) reads `self.training` in forward."""
    return not cls.__module__.startswith("torch.") and _train_only(cls)  # type: ignore[arg-type]


def _defaults_after(module: nn.Module, count: int | None) -> dict | None:
    """forward's arguments past the first `count`, at their defaults (timm's
    ``forward(x, attn_mask=None)``): constants of the trace, not inputs of the graph."""
    if count is None:
        return None
    try:
        signature = inspect.signature(module.forward)
    except (TypeError, ValueError):
        return None
    named = [p for p in signature.parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    rest = {p.name: p.default for p in named[count:] if p.default is not p.empty}
    return rest or None


def _big_buffer(root: nn.Module, target: str) -> bool:
    """A buffer too large to write into the graph as a constant (levit's attention bias
    indices), read directly in forward: its module is kept whole instead."""
    owner, _, name = target.rpartition(".")
    value = getattr(root.get_submodule(owner), name, None)
    return isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter) and \
        value.numel() > MAX_CONSTANT


def _owner(node) -> str:
    """The innermost submodule whose forward made the fx node ('' for the root's)."""
    stack = node.meta.get("nn_module_stack") or {}
    return next(reversed(stack), "") if stack else ""


def _failing_module(error: BaseException, root: nn.Module) -> str:
    """The innermost submodule of `root` whose forward raised `error` while tracing."""
    paths = {id(m): name for name, m in root.named_modules() if name}
    owner = ""
    for frame, _ in traceback.walk_tb(error.__traceback__):
        this = frame.f_locals.get("self")
        if id(this) in paths and frame.f_code.co_name == "forward":
            owner = paths[id(this)]
    return owner


def _trace_error(module: nn.Module, e: Exception) -> NodegraphError:
    if isinstance(e, torch.fx.proxy.TraceError):
        return NodegraphError(f"{type(module).__name__}.forward cannot be traced{_where(e)}: "
                              f"{e} (fx follows only code whose path does not depend on the "
                              "values of tensors: an `if` or `for` on a tensor, or a tensor "
                              "turned into a Python number, stops it; keep the module that "
                              "does it as one block with --leaf MODULE_PATH)")
    text = " ".join(str(e).split())[:300]
    if any("/einops/" in f.f_code.co_filename.replace("\\", "/")
           for f, _ in traceback.walk_tb(e.__traceback__)):
        return NodegraphError(f"{type(module).__name__}.forward cannot be traced{_where(e)}: "
                              "einops does not take torch.fx's symbolic tensors; write that "
                              "line with torch (rearrange(x, 'b c h w -> b (h w) c') is "
                              "x.flatten(2).transpose(1, 2)), or keep the submodule that "
                              "calls it whole with --leaf MODULE_PATH")
    return NodegraphError(f"{type(module).__name__}.forward cannot be traced{_where(e)}: "
                          f"{type(e).__name__}: {text}")


def _where(error: BaseException) -> str:
    """' at file:line (`the code`)': the last frame of the traced code outside torch."""
    frames = [f for f, _ in traceback.walk_tb(error.__traceback__)
              if "/torch/" not in f.f_code.co_filename.replace("\\", "/")
              and f.f_code.co_filename != __file__]
    if not frames:
        return ""
    own = [f for f in frames if not any(part in f.f_code.co_filename.replace("\\", "/")
                                        for part in ("/site-packages/", "/dist-packages/"))]
    frame = (own or frames)[-1]  # the user's line, not the library's (einops) it called
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return f" at {Path(frame.f_code.co_filename).name}:{frame.f_lineno} (`{line}`)"


def _run(traced: torch.fx.GraphModule, inputs: tuple) -> dict:
    """Every fx node's value on the example inputs."""
    values: dict = {}

    class Recording(torch.fx.Interpreter):
        def run_node(self, n):
            values[n] = super().run_node(n)
            return values[n]

    try:
        with torch.no_grad():
            Recording(traced).run(*inputs)
    except Exception as e:
        text = " ".join(str(e).split("While executing")[0].split())[:300]
        raise NodegraphError(f"the traced module fails on the example inputs "
                             f"{[tuple(x.shape) for x in inputs]}: {type(e).__name__}: "
                             f"{text}") from None
    return values


def probe(root: nn.Module, traced: torch.fx.GraphModule, inputs: tuple,
          fixed: dict[int, dict[int, int]]) -> list[Probe]:
    """The trace run again with input dims doubled (the example tiled along them, so token
    ids and masks stay valid), one group of equal-sized dims at a time (a mask follows its
    ids), each member alone where the group fails. A size that no probe changes is a
    constant of the graph; one that changes stays an expression. A dim whose doubling the
    module refuses, or where the trace stops giving the module's numbers, is recorded in
    `fixed`: the import is valid for its example size only."""
    groups: dict[int, list[tuple[int, int]]] = {}
    for i, x in enumerate(inputs):
        for dim in range(x.ndim):
            groups.setdefault(int(x.shape[dim]), []).append((i, dim))
    sizes = [tuple(x.shape) for x in inputs]
    probes: list[Probe] = []
    for members in groups.values():
        tries = [members] + ([[m] for m in members] if len(members) > 1 else [])
        differs: list[tuple[int, int]] = []
        for dims in tries:
            values = _probe_run(root, traced, inputs, dims)
            if isinstance(values, dict):
                probes.append(Probe(dims, sizes, values))
                break
            if values == "differs" and len(dims) == 1:
                differs += dims
        else:  # (a size the module itself refuses, channels most often, is no guard's job)
            for i, dim in differs if len(members) > 1 else members if values == "differs" \
                    else []:
                fixed.setdefault(i, {})[dim] = sizes[i][dim]
    return probes


def _probe_run(root: nn.Module, traced: torch.fx.GraphModule, inputs: tuple,
               dims: list[tuple[int, int]]) -> dict | str:
    """Every fx node's value on the inputs doubled along `dims`; "refused" where the
    module fails there, "differs" where the trace fails or its outputs are not the
    module's."""
    tiled = list(inputs)
    for i, dim in dims:
        tiled[i] = torch.cat([tiled[i], tiled[i]], dim=dim)
    try:
        with torch.no_grad():
            want = _leaves(root(*tiled), torch.Tensor)
    except Exception:
        return "refused"
    try:
        values = _run(traced, tuple(tiled))
    except (NodegraphError, Exception):
        return "differs"
    [output] = [n for n in traced.graph.nodes if n.op == "output"]
    have = _leaves(values.get(output), torch.Tensor)
    if len(have) < len(want) or any(
            h.shape != w.shape or h.dtype != w.dtype or w.numel() and float(
                (h.double() - w.double()).abs().max()) > TOLERANCE * max(
                1.0, float(w.double().abs().max())) for h, w in zip(have, want, strict=False)):
        return "differs"
    # only shapes and sizes are read from a probe: its tensors are kept as meta tensors, so
    # a big model's probes hold no activations
    return {n: _as_meta(v) for n, v in values.items()}


def _as_meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.empty(value.shape, dtype=value.dtype, device="meta")
    if isinstance(value, tuple | list) and any(isinstance(v, torch.Tensor) for v in value):
        return type(value)(_as_meta(v) for v in value) if not hasattr(value, "_fields") \
            else value
    return value


# -- the whole import ----------------------------------------------------------------------------


@dataclass
class Imported:
    """An imported graph and what came with it."""

    graph: Graph
    weights: dict[str, torch.Tensor]
    outputs: list[tuple[str, str]]
    max_difference: float = 0.0  # relative to the largest output (at least 1)
    reference: list[torch.Tensor] = field(default_factory=list)  # the module's outputs
    placeholders: list[str] = field(default_factory=list)  # the input nodes, in order
    fixed_sizes: dict[str, dict[str, int]] = field(default_factory=dict)  # input -> dim -> size
    notes: list[str] = field(default_factory=list)  # why those sizes are fixed
    module: Any = None  # the module imported (eval mode)


def import_module(module_or_instance: Any, example_inputs: Any, path: str | Path | None = None,
                  kwargs: dict | None = None, name: str | None = None) -> Graph:
    """Trace a module into an editable graph; see `import_graph` (this returns its graph)."""
    return import_graph(module_or_instance, example_inputs, path, kwargs, name).graph


# the cautious trace: buffers read as plain tensors and a module that reads a big one kept
# whole, as before issue #26 — taken when the full trace stops or does not give the
# module's numbers (`if self.initialized:` on a buffer's value, a cache of a tensor made
# from buffers kept across calls)
_CAUTIOUS: contextvars.ContextVar[bool] = contextvars.ContextVar("cautious", default=False)


def import_graph(module_or_instance: Any, example_inputs: Any, path: str | Path | None = None,
                 kwargs: dict | None = None, name: str | None = None,
                 leaves: Iterable[str] = (), loss: str | None = None,
                 optimizer: str | None = None, groups: bool = True) -> Imported:
    """See `_import_graph`; where the graph's outputs differ from the module's, it is
    traced again cautiously (`_CAUTIOUS`) before the difference is reported."""
    given = dict(kwargs or {})
    try:
        return _import_graph(module_or_instance, example_inputs, path, dict(given), name,
                             leaves, loss, optimizer, groups)
    except NodegraphError as e:
        if not any(why in str(e) for why in ("differ from the module's", "cannot be traced",
                                             "fails on the example inputs")):
            raise
    token = _CAUTIOUS.set(True)
    try:
        return _import_graph(module_or_instance, example_inputs, path, dict(given), name,
                             leaves, loss, optimizer, groups)
    finally:
        _CAUTIOUS.reset(token)


def _import_graph(module_or_instance: Any, example_inputs: Any, path: str | Path | None = None,
                  kwargs: dict | None = None, name: str | None = None,
                  leaves: Iterable[str] = (), loss: str | None = None,
                  optimizer: str | None = None, groups: bool = True) -> Imported:
    """Trace `module_or_instance` — an nn.Module, its class or factory, or a target string
    (see `fx_targets`; built with `kwargs`) — on `example_inputs` (a tensor or a tuple of
    them) into a graph; the submodules named in `leaves` stay opaque blocks, and `loss` /
    `optimizer` (see `fx_finish.add_training`) make it trainable at once. With `groups`
    the module hierarchy becomes nested groups (`fx_groups`).

    With `path` the graph is saved there, with its weights (``STEM.safetensors``) and
    example inputs (``STEM.inputs.npz``) beside it; without, those two go to a temporary
    folder. The graph is compiled and checked against the module before it is returned.
    """
    inputs = example_inputs if isinstance(example_inputs, tuple | list) else (example_inputs,)
    inputs = tuple(torch.as_tensor(x) for x in inputs)
    kwargs = dict(kwargs or {})
    root, recorder, target = _instantiate(module_or_instance, kwargs)
    root.eval()
    try:  # inputs the module itself refuses are the user's to change, not a trace problem
        with torch.no_grad():
            root(*inputs)
    except Exception as e:
        text = " ".join(str(e).split())[:300]
        raise NodegraphError(f"{type(root).__name__} itself fails on the example inputs "
                             f"{[tuple(x.shape) for x in inputs]}{_where(e)}: "
                             f"{type(e).__name__}: {text} (give inputs it takes: "
                             "--input-shape, --input-dtype or --inputs)") from None
    traced = trace(root, leaves, len(inputs), inputs)
    traced, heads = _with_training_outputs(root, traced, leaves, inputs)
    values = _run(traced, inputs)
    importer = Importer(root, traced, values, recorder, target, kwargs)
    importer.probes = probe(root, traced, inputs, importer.fixed)
    for extra in [n for n in traced.graph.nodes if n.op == "placeholder"][len(inputs):]:
        importer.symbols[extra] = _Constant(values.get(extra))  # a default left as it is
    planned = importer.plan()
    placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"][:len(inputs)]
    [output] = [n for n in traced.graph.nodes if n.op == "output"]
    outs = _leaves(output.args[0], torch.fx.Node)
    with torch.no_grad():
        reference = root(*inputs)
    first = next(iter(_leaves(reference, torch.Tensor)), None)
    graph_name = name or type(root).__name__
    base = Path(path) if path is not None else Path(tempfile.mkdtemp(prefix="nodegraph-import-")) \
        / f"{graph_name}.json"
    npz = base.with_name(base.stem + ".inputs.npz")
    weights_path = base.with_name(base.stem + ".safetensors")
    graph = Graph(graph_name)
    graph.folder = base.parent.absolute()  # relative paths (data, weights) start there
    ids = {p: p.name for p in placeholders}
    for p in placeholders:
        graph.add("opaque.Arrays", id=ids[p], path=npz.name, x_key=p.name, y_key="output")
    fixed = _guard_sizes(graph, placeholders, ids, importer, inputs)
    weights: dict[str, torch.Tensor] = {}
    for item in planned:
        graph.add(item.type, id=item.id, **item.params)
        spec = graph.registry.get(item.type)
        for port, source in zip(spec.inputs, item.inputs, strict=False):
            graph.connect(_source_of(source, ids, importer), (item.id, port.name))
        weights.update({f"{item.id}.{k}": v.detach().clone() for k, v in item.weights.items()})
    for src, dst, param, src_param in importer.ties:  # one parameter, several blocks
        graph.add_tie(Tie(src.id, src_param, dst.id, param))
    out_keys = [_source_of(o, ids, importer) for o in outs]
    if groups:  # the module hierarchy as nested groups; execution's ids key the weights
        flat = fx_groups.group_by_scope(graph, importer.scopes(), {
            *(n for n, _ in out_keys), *ids.values(), *importer.guards.values()})
        weights = {f"{flat.get(k.partition('.')[0], k.partition('.')[0])}."
                   f"{k.partition('.')[2]}": v for k, v in weights.items()}
    allowlist.trust(graph)  # the user's own module, imported at their request
    graph.extra["imported"] = {"source": target or type(root).__qualname__,
                               "weights": weights_path.name,  # beside the graph
                               "outputs": [f"{n}.{p}" for n, p in out_keys]}
    if fixed:  # the sizes the import is valid for (the guards refuse others)
        graph.extra["imported"]["fixed_sizes"] = fixed
        graph.extra["imported"]["notes"] = list(importer.notes)
    if traced.meta.get("size_checks"):  # `if H != W:` in forward, decided at import
        graph.extra["imported"]["size_checks"] = list(traced.meta["size_checks"])
    arrays = {p.name: x.numpy() for p, x in zip(placeholders, inputs, strict=False)}
    arrays["output"] = first.detach().numpy() if first is not None and first.ndim and \
        len(first) == len(inputs[0]) else inputs[0].numpy()
    base.parent.mkdir(parents=True, exist_ok=True)
    np.savez(npz, **arrays)
    if heads:  # the training-only heads (googlenet's aux logits), after the eval outputs
        graph.extra["imported"]["training_outputs"] = graph.extra["imported"]["outputs"][-heads:]
    difference = _check(graph, weights, out_keys[:len(out_keys) - heads], placeholders, ids,
                        inputs, reference)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(weights_path))
    fx_finish.add_training(graph, base.parent, loss, optimizer)
    graph.set_ui("positions", fx_finish.layered_positions(graph))
    for defn in graph.groups.values():
        defn.body.set_ui("positions", fx_finish.layered_positions(defn.body))
    if path is not None:
        from nodegraph.model.fileformat import save

        save(graph, base)
    return Imported(graph, weights, out_keys, difference,
                    [t.detach() for t in _leaves(reference, torch.Tensor)],
                    [ids[p] for p in placeholders], fixed, list(importer.notes), root)


def _guard_sizes(graph: Graph, placeholders: list, ids: dict, importer: Importer,
                 inputs: tuple) -> dict[str, dict[str, int]]:
    """For each input with dims the import is valid at one size only (`Importer.fixed`):
    a node right after it that passes it on unchanged where those dims have that size and
    refuses any other size, naming it (validation reports it on that node), so no other
    size computes wrong numbers. Returns {input: {dim: size}} for the file."""
    checks: dict[int, list[tuple[Any, bool, str, list]]] = {}
    for tree, outcome, where in importer.traced.meta.get("size_check_trees", []):
        reads = _tree_inputs(tree) if tree is not None else []
        if tree is None or not reads or any(r not in placeholders for r in reads):
            for i, x in enumerate(inputs):  # no expression: every size stays as it is
                importer.fixed.setdefault(i, {}).update({d: int(x.shape[d])
                                                         for d in range(1, x.ndim)})
            importer.notes.append(f"the size check at {where} has no expression; the "
                                  "import is valid for the example's sizes only")
            continue
        first = placeholders.index(reads[0])
        checks.setdefault(first, []).append((tree, outcome, where, reads))
    recorded: dict[str, dict[str, int]] = {}
    for i in sorted(set(importer.fixed) | set(checks)):
        dims = importer.fixed.get(i, {})
        if i >= len(placeholders) or not dims and i not in checks:
            continue
        name = ids[placeholders[i]]
        ports = [placeholders[i]]  # the guard's inputs: this one, then any a check reads
        for _, _, _, reads in checks.get(i, []):
            ports += [r for r in reads if r not in ports]
        sizes: list[Any] = []
        for d in range(inputs[i].ndim):
            size: Any = {"size": [0, d]}
            if d == 0:
                for tree, outcome, where, _ in checks.get(i, []):
                    size = {"expr": ["check", _tree_json(tree, ports), outcome,
                                     f"the check at {where} was {outcome} when the module "
                                     "was imported and the graph follows that branch; "
                                     "these input sizes take the other one", size]}
            if d in dims:
                size = {"expr": ["expect", size, dims[d],
                                 f"'{name}' was imported at size {dims[d]} in dim {d} and "
                                 "the module computes with that size in a way the graph "
                                 "cannot follow (see the import's notes); import it again "
                                 "at this size"]}
            sizes.append(size)
        guard = f"{name}_sizes"
        graph.add("opaque.Function", id=guard, function="torch:Tensor.expand",
                  args=[{"input": 0}, {"tuple": sizes}], kwargs={})
        spec = graph.registry.get("opaque.Function")
        for port, source in zip(spec.inputs, ports, strict=False):
            graph.connect((ids[source], "x"), (guard, port.name))
        importer.guards[placeholders[i]] = guard
        if dims:
            recorded[name] = {str(d): s for d, s in sorted(dims.items())}
    return recorded


def _instantiate(obj: Any, kwargs: dict) -> tuple[nn.Module, Recorder | None, str | None]:
    """The module to trace, the recorder that watched it being built (when it was built
    here) and the import path of what builds it again (its class, or its factory)."""
    if isinstance(obj, nn.Module):
        return obj, None, _import_path(type(obj)) if _rebuilds_default(type(obj)) else None
    model_name = path = None
    if isinstance(obj, str):  # named by the user on the command line: imported as asked
        obj, path, model_name = fx_targets.resolve(obj)
    elif isinstance(obj, type):
        path = _import_path(obj)
    built = fx_targets.build(obj, kwargs, model_name, path)
    given = dict(built.kwargs)  # (timm: with the model name)
    kwargs.clear()
    kwargs.update(given)
    return built.module, built.recorder, built.target


def _rebuilds_default(cls: type) -> bool:
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in signature.parameters.values())


def _leaves(value: Any, kind: type) -> list:
    """The `kind` objects in a (nested) tuple, list or dict, in order."""
    if isinstance(value, kind):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = [getattr(value, f.name) for f in dataclasses.fields(value)]
    items = value.values() if isinstance(value, dict) else value if isinstance(
        value, tuple | list) else ()
    return [leaf for v in items for leaf in _leaves(v, kind)]


def _source_of(value, ids: dict, importer: Importer) -> tuple[str, str]:
    if isinstance(value, Planned):  # a link of a chain (see Importer._concat)
        return (value.id, "output")
    symbol = importer.symbols.get(value)
    if isinstance(symbol, _Alias):
        value = symbol.node
    if value in importer.guards:  # an input valid at one size: through its guard
        return (importer.guards[value], "output")
    if value in ids:
        return (ids[value], "x")
    if value in importer.planned:
        return (importer.planned[value].id, "output")
    raise NodegraphError(f"'{value}' is not a tensor a block can pass on")


def _check(graph, weights, out_keys, placeholders, ids, inputs, reference) -> float:
    """Compile the graph with the module's weights and compare the outputs."""
    from nodegraph.interop.export.weights import load_weights as load
    from nodegraph.runtime.compile import compile_graph

    compiled = compile_graph(graph, device="cpu", for_training=False, referenced_weights=False)
    load(compiled, weights)
    compiled.module.eval()
    values = {(ids[p], "x"): x for p, x in zip(placeholders, inputs, strict=False)}
    with torch.no_grad():
        got = compiled.module.run(compiled.module.full_plan, values)
    expected = _leaves(reference, torch.Tensor)
    if len(expected) != len(out_keys):
        raise NodegraphError(f"the module returns {len(expected)} tensors, the graph "
                             f"{len(out_keys)}")
    worst = 0.0
    for key, want in zip(out_keys, expected, strict=True):
        have = got[key]
        if have.shape != want.shape:
            raise NodegraphError(f"the imported graph's output {key[0]} is "
                                 f"{tuple(have.shape)}, the module's {tuple(want.shape)}")
        worst = max(worst, float((have.double() - want.double()).abs().max()) if
                    want.numel() else 0.0)
    if worst > TOLERANCE:
        raise NodegraphError(f"the imported graph's outputs differ from the module's by "
                             f"{worst:.3g}")
    return worst


def load_weights(compiled) -> None:
    """Load the weights `nodegraph import` saved beside an imported graph."""
    from safetensors.torch import load_file

    from nodegraph.interop.export.weights import load_weights as load

    path = fx_weights.referenced(compiled.graph)
    if path is None:
        raise NodegraphError("this graph was not made by nodegraph import: it names no weights")
    load(compiled, load_file(str(path)))


# -- the command ---------------------------------------------------------------------------------
