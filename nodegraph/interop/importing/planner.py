"""The shared back end's first step: one traced graph (either front end's) as planned nodes.

Each call of the trace becomes a `Planned` node: a block of the library where one computes
it, else an opaque block; sizes become constants or expressions (see `values`), and each
node is named by the module whose forward made it.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch import nn

from nodegraph.interop.export.record import Recorder
from nodegraph.interop.importing import composite, scoping
from nodegraph.interop.importing.blocks import (
    MAX_CONSTANT,
    MAX_INPUTS,
    _equivalents,
    _kwargs,
    _kwargs_from_attributes,
    _rebuilds,
    function_blocks,
    module_block,
)
from nodegraph.interop.importing.naming import (
    _describe,
    _function_path,
    _import_path,
    _json,
    _line,
)
from nodegraph.interop.importing.values import (
    _NOT_SIZE,
    _WEIGHT_READ,
    SIZE_OPERATIONS,
    Probe,
    _Alias,
    _Constant,
    _hashable,
    _reads_size,
    _same,
    _short,
    _Sym,
    _tree_inputs,
)
from nodegraph.model.errors import NodegraphError

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
        scoping.name_by_scope(self)
        scoping.tie_shared(self)
        return self.order

    def scopes(self) -> dict[str, str]:
        """Planned node id -> the dotted path of the module whose forward made it (see
        `scoping.scopes`)."""
        return scoping.scopes(self)

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
            links = composite.chain(module, module_block) if isinstance(
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
        return getattr(self.root.get_submodule(owner) if owner else self.root, name, None)

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
