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

The module's forward arguments become data blocks (`opaque.Arrays`) reading the example
inputs from an .npz beside the graph, so `nodegraph validate` and `info` infer every shape;
their `y` holds the module's own outputs. The weights go to a safetensors file beside the
graph, keyed ``node.param``; load them with `load_weights(compiled)`. Before anything is
written, the imported graph is compiled and must give the module's outputs.
"""

from __future__ import annotations

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

from nodegraph.interop import fx_finish, fx_targets
from nodegraph.interop.export.record import Recorder
from nodegraph.interop.export.source import MAX_TENSOR_LITERAL, torch_path
from nodegraph.model import allowlist
from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph
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

    def plan(self) -> list[Planned]:
        for node in self.traced.graph.nodes:
            if node.op in ("placeholder", "output") or node in self.symbols:
                continue  # (a getitem folded into the module before it is in symbols)
            value = self.values.get(node)
            if self._tensors(node):  # x.chunk(2): each element read is one node
                continue
            if node.op == "call_function" and node.target is operator.getitem and \
                    node.args[0] in self.tuples:
                planned = self._opaque_function(node.args[0])
                planned.id, planned.params["index"] = node.name, node.args[1]
                self.planned[node] = planned
                self.order.append(planned)
                continue
            if not isinstance(value, torch.Tensor) and node.op != "call_module":
                self.symbols[node] = self._symbol(node)
                continue
            planned = self._node(node)
            for item in self.extra:  # the head of a chain (a long concatenation)
                self.order.append(item)
            self.extra.clear()
            self.planned[node] = planned
            self.order.append(planned)
        return self.order

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
        """How a non-tensor value is computed: ("size", tensor node, dim) when it is the
        batch size, else its value on the example (a fixed size or a constant)."""
        target, args = node.target, node.args
        if node.op == "call_method" and target == "size":
            return self._size(args[0], args[1] if len(args) > 1 else node.kwargs.get("dim"))
        if node.op == "call_function" and target is getattr and args[1] == "shape":
            return self._size(args[0], None)
        if node.op == "call_function" and target is operator.getitem and \
                isinstance(self.symbols.get(args[0]), tuple) and \
                self.symbols[args[0]][0] == "shape":
            tensor = self.symbols[args[0]][1]
            if isinstance(args[1], int):
                return self._size(tensor, args[1])
            if isinstance(args[1], slice):  # x.shape[-2:]: fixed unless it holds dim 0
                dims = range(self.values[tensor].ndim)[args[1]]
                if 0 not in dims:
                    return _Constant(tuple(self.values[tensor].shape[d] for d in dims))
        parts = [self.symbols.get(a) for a in node.all_input_nodes]
        if any(isinstance(p, tuple) for p in parts):
            raise NodegraphError(f"'{node.name}' ({_describe(node)}) computes with the batch "
                                 "size; a graph passes only tensors between blocks, so write "
                                 "it with -1 (x.view(-1, 16)) or without the batch size")
        if node.op == "call_module" or isinstance(self.values.get(node), torch.Tensor):
            return self.values.get(node)
        return _Constant(self.values.get(node))

    def _size(self, tensor, dim) -> Any:
        shape = self.values[tensor].shape
        if dim is None:
            return ("shape", tensor)
        if dim % len(shape) == 0:
            return ("size", tensor, 0)
        return _Constant(shape[dim])  # every other dim is fixed for a graph

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
        before, after = self.values[source].shape, self.values[node].shape
        if node.target in ("view", "reshape") and before[:1] == after[:1]:
            first = self.symbols.get(rest[0], rest[0])
            if (first == -1 or first == ("size", source, 0)) and all(
                    isinstance(self._const(r), int) for r in rest[1:]):
                return Planned(node.name, "layers.Reshape",
                               {"shape": [self._const(r) for r in rest[1:]]}, [source])
        if node.target == "permute" and all(isinstance(self._const(r), int) for r in rest):
            dims = [self._const(r) % len(before) for r in rest]
            if dims[0] == 0:
                return Planned(node.name, "layers.Permute", {"dims": dims[1:]}, [source])
        return None

    def _attribute(self, node) -> Planned:
        value = self.values[node]
        param = isinstance(self._owner_attr(node.target), nn.Parameter)
        if param:
            return Planned(node.name, "layers.Parameter",
                           {"shape": list(value.shape), "init": "zeros"}, [],
                           {"value": value.detach().clone()})
        if value.numel() > MAX_CONSTANT:
            raise NodegraphError(f"'{node.target}' is a buffer of {value.numel()} values used "
                                 "directly in forward; too large to write into the graph")
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
        args = list(node.args)
        tensor_kwargs = [k for k, v in node.kwargs.items() if self._is_tensor(v)]
        if len(args) > MAX_INPUTS or not all(self._is_tensor(a) for a in args) or tensor_kwargs \
                or not self._constant_args([], node.kwargs):
            raise NodegraphError(f"'{node.target}' ({type(module).__name__}) is called with "
                                 f"other arguments than up to {MAX_INPUTS} tensors and "
                                 "constant keyword arguments; a graph cannot pass them (keep "
                                 "its caller whole with --leaf)")
        params = self._construction(node.target, module)
        if node.kwargs:  # need_weights=False: fixed for every call
            params["call_kwargs"] = _json({k: self._const(v) for k, v in node.kwargs.items()})
        index = self._index_used(node)
        if index is not None:
            params["index"] = index
        return Planned(node.name, "opaque.Module", params, args,
                       {f"module.{k}": v for k, v in module.state_dict().items()})

    def _index_used(self, node) -> int | None:
        """The one element of a tuple-returning module's output that forward reads."""
        if isinstance(self.values[node], torch.Tensor):
            return None
        picks = {u.args[1] for u in node.users if u.target is operator.getitem}
        if len(picks) != 1 or any(u.target is not operator.getitem for u in node.users):
            raise NodegraphError(f"'{node.target}' returns several values and forward uses "
                                 f"{'more than one' if len(picks) > 1 else 'them whole'}; an "
                                 "opaque block has one output")
        index = picks.pop()
        for user in node.users:  # the getitem is this block's output now
            self.symbols[user] = _Alias(node)
        return index

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
                if isinstance(symbol, tuple) and symbol[0] == "size":
                    return {"size": [port(symbol[1]), 0]}
                if isinstance(symbol, tuple) and symbol[0] == "shape":
                    raise NodegraphError(f"'{node.name}' ({_describe(node)}) passes a whole "
                                         "shape, batch size included; not supported")
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
    if isinstance(value, float) and not math.isfinite(value):
        raise NodegraphError(f"the value {value} cannot be written to a graph file")
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
    (built through the block's declaration, as a graph would build it)."""
    spec = default_registry().get("opaque.Module")
    try:  # the class is the live module's own, already imported by the user: trusted
        params, problems = spec.resolve_params({"target": target, "kwargs": kwargs,
                                                "path": path})
        if problems:
            return False
        with allowlist.trusting(allowlist.trusted_now() | {allowlist.module_of(target)}):
            built = spec.build(params, {}).module
        built.load_state_dict(module.state_dict())
    except Exception:
        return False
    return type(built) is type(module)


# -- tracing -----------------------------------------------------------------------------------


class _Tracer(torch.fx.Tracer):
    """torch.fx's tracer, keeping every module the library maps, every torch.nn module (a
    TransformerEncoderLayer is one opaque block), every subclass of a torch.nn layer that
    another library extends (timm's BatchNormAct2d: its weights stay one module's) and the
    modules named in `leaves` as one call."""

    def __init__(self, leaves: frozenset[str] = frozenset()):
        super().__init__()
        self.leaves = leaves

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        # (the class only: reading the module's attributes here would add them to the trace)
        return type(m) in _equivalents()[0] or qualname in self.leaves or isinstance(
            m, EXTENDED) or _train_only(type(m)) and not any(  # type: ignore[arg-type]
            True for _ in m.children()) or super().is_leaf_module(m, qualname)
        # (the ignore: torch's Module.__hash__ stub makes mypy think a class unhashable)


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


def trace(module: nn.Module, leaves: Iterable[str] = (),
          inputs: int | None = None) -> torch.fx.GraphModule:
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
            graph = _Tracer(frozenset(leaves)).trace(module, concrete_args=concrete)
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
        outside |= {n.target.rpartition(".")[0] for n in graph.nodes if n.op == "get_attr"
                    and "." in n.target and _big_buffer(module, n.target)}
        # a tensor made while tracing (fx's `_tensor_constantN`, timm swin's relative
        # position index): kept inside the module whose forward made it
        outside |= {_owner(n) for n in graph.nodes if n.op == "get_attr" and "." not in
                    n.target and _owner(n) and _big_buffer(module, n.target)}
        if not outside - leaves:
            break
        leaves |= outside
    traced = torch.fx.GraphModule(module, graph)
    _plain_outputs(traced.graph)
    traced.graph.eliminate_dead_code()  # an unused tuple element (`out, _ = lstm(x)`)
    traced.recompile()
    return traced


def _plain_outputs(graph: torch.fx.Graph) -> None:
    """A named tuple returned by forward (torchvision's GoogLeNetOutputs while training)
    becomes the plain tuple of its fields: each one an output of the graph."""
    [output] = [n for n in graph.nodes if n.op == "output"]
    value = output.args[0]
    if isinstance(value, torch.fx.Node) and value.op == "call_function" and isinstance(
            value.target, type) and issubclass(value.target, tuple) and \
            hasattr(value.target, "_fields") and len(value.users) == 1:
        fields = list(value.args) + [value.kwargs[f] for f in value.target._fields
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
        trained = trace(root, set(leaves) | reads, len(inputs))
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
    return NodegraphError(f"{type(module).__name__}.forward cannot be traced{_where(e)}: "
                          f"{type(e).__name__}: {text}")


def _where(error: BaseException) -> str:
    """' at file:line (`the code`)': the last frame of the traced code outside torch."""
    frames = [f for f, _ in traceback.walk_tb(error.__traceback__)
              if "/torch/" not in f.f_code.co_filename.replace("\\", "/")
              and f.f_code.co_filename != __file__]
    if not frames:
        return ""
    frame = frames[-1]
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


def import_module(module_or_instance: Any, example_inputs: Any, path: str | Path | None = None,
                  kwargs: dict | None = None, name: str | None = None) -> Graph:
    """Trace a module into an editable graph; see `import_graph` (this returns its graph)."""
    return import_graph(module_or_instance, example_inputs, path, kwargs, name).graph


def import_graph(module_or_instance: Any, example_inputs: Any, path: str | Path | None = None,
                 kwargs: dict | None = None, name: str | None = None,
                 leaves: Iterable[str] = (), loss: str | None = None,
                 optimizer: str | None = None) -> Imported:
    """Trace `module_or_instance` — an nn.Module, its class or factory, or a target string
    (see `fx_targets`; built with `kwargs`) — on `example_inputs` (a tensor or a tuple of
    them) into a graph; the submodules named in `leaves` stay opaque blocks, and `loss` /
    `optimizer` (see `fx_finish.add_training`) make it trainable at once.

    With `path` the graph is saved there, with its weights (``STEM.safetensors``) and
    example inputs (``STEM.inputs.npz``) beside it; without, those two go to a temporary
    folder. The graph is compiled and checked against the module before it is returned.
    """
    inputs = example_inputs if isinstance(example_inputs, tuple | list) else (example_inputs,)
    inputs = tuple(torch.as_tensor(x) for x in inputs)
    kwargs = dict(kwargs or {})
    root, recorder, target = _instantiate(module_or_instance, kwargs)
    root.eval()
    traced = trace(root, leaves, len(inputs))
    traced, heads = _with_training_outputs(root, traced, leaves, inputs)
    values = _run(traced, inputs)
    importer = Importer(root, traced, values, recorder, target, kwargs)
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
    weights: dict[str, torch.Tensor] = {}
    for item in planned:
        graph.add(item.type, id=item.id, **item.params)
        spec = graph.registry.get(item.type)
        for port, source in zip(spec.inputs, item.inputs, strict=False):
            graph.connect(_source_of(source, ids, importer), (item.id, port.name))
        weights.update({f"{item.id}.{k}": v.detach().clone() for k, v in item.weights.items()})
    out_keys = [_source_of(o, ids, importer) for o in outs]
    allowlist.trust(graph)  # the user's own module, imported at their request
    graph.extra["imported"] = {"source": target or type(root).__qualname__,
                               "weights": weights_path.name,  # beside the graph
                               "outputs": [f"{n}.{p}" for n, p in out_keys]}
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
    graph.ui["positions"] = fx_finish.layered_positions(graph)
    if path is not None:
        from nodegraph.model.fileformat import save

        save(graph, base)
    return Imported(graph, weights, out_keys, difference,
                    [t.detach() for t in _leaves(reference, torch.Tensor)],
                    [ids[p] for p in placeholders])


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
    items = value.values() if isinstance(value, dict) else value if isinstance(
        value, tuple | list) else ()
    return [leaf for v in items for leaf in _leaves(v, kind)]


def _source_of(value, ids: dict, importer: Importer) -> tuple[str, str]:
    if isinstance(value, Planned):  # a link of a chain (see Importer._concat)
        return (value.id, "output")
    symbol = importer.symbols.get(value)
    if isinstance(symbol, _Alias):
        value = symbol.node
    if value in ids:
        return (ids[value], "x")
    if value in importer.planned:
        return (importer.planned[value].id, "output")
    raise NodegraphError(f"'{value}' is not a tensor a block can pass on")


def _check(graph, weights, out_keys, placeholders, ids, inputs, reference) -> float:
    """Compile the graph with the module's weights and compare the outputs."""
    from nodegraph.interop.export.weights import load_weights as load
    from nodegraph.runtime.compile import compile

    compiled = compile(graph, device="cpu", for_training=False, referenced_weights=False)
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
