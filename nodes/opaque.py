"""Opaque blocks: what `nodegraph import` cannot say with the library's blocks, still running.

A module traced from PyTorch code maps to blocks where the library has them (a Linear, a
ReLU, an addition); the rest lands here, clearly marked. `opaque.Module` builds a module
class named by its import path (``torch.nn:TransformerEncoderLayer``) with JSON keyword
arguments — or builds a root class and takes one of its submodules by path — so the graph
file holds no pickle, only a name; `opaque.Function` calls a torch function or tensor
method (``torch:Tensor.mean``) with fixed extra arguments; `opaque.Arrays` is a data block
of arrays from an .npz, dtypes kept, that gives an imported graph its example inputs so its
shapes can be inferred. Every name is looked up in `nodegraph.model.allowlist` (pure tensor
functions, torch.nn modules); a name outside it runs only in a graph the user trusts.

Arguments are JSON. A few values JSON has no word for are written as one-key objects:
``{"input": k}`` is the block's input k, ``{"size": [k, d]}`` that input's size in dim d
(the batch size, for d = 0), ``{"tuple": [...]}``, ``{"slice": [start, stop, step]}``,
``{"ellipsis": true}``, ``{"dtype": "float32"}`` and ``{"function": "module:qualname"}``.
Sizes that follow the input stay expressions: ``{"shape": k}`` is input k's whole shape,
``{"float": "-inf"}`` a number JSON lacks,
``{"device": k}`` its device (a tensor made in forward lands beside its inputs), and
``{"expr": [op, a, b]}`` size arithmetic (`add`, `sub`, `mul`, `floordiv`, `truediv`, `mod`,
`neg`, `pow`, `sqrt`); ``{"expr": ["expect", size, value, message]}`` is `size` where it equals
`value` and an error saying `message` elsewhere (an import valid for one size only);
``{"expr": ["check", condition, outcome, message, value]}`` is `value` where a size check
of forward (`h != w`, with `eq` ... `ge`) comes out as it did at import.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import torch
from torch import nn

from nodegraph.kinds import devices, footprint
from nodegraph.kinds.datameta import sized
from nodegraph.kinds.dataset import DataParams, data_params, from_arrays
from nodegraph.kinds.declare import data, op
from nodegraph.model import allowlist
from nodegraph.model.errors import NodegraphError, ParamError
from nodegraph.model.spec import (
    Param,
    Params,
    Port,
    int_param,
    str_param,
)
from nodes.data._files import npz_headers, read_npz

INPUTS = [Port("input", doc="the first argument"),
          *(Port(f"input_{i}", doc=f"argument {i}", optional=True) for i in range(2, 9))]
DTYPES = {name: value for name in dir(torch) if isinstance(value := getattr(torch, name),
                                                            torch.dtype)}


def resolve(path: str, what: str, kind: str = allowlist.FUNCTIONS) -> Any:
    """The object named ``module:qualname`` (``torch.nn:Linear``, ``torch:Tensor.mean``),
    from the allowlist or a module the graph is trusted to import."""
    return allowlist.resolve(path, what, kind)


def decode(value: Any, inputs: tuple = ()) -> Any:
    """A JSON argument as the Python value it stands for (see the module doc)."""
    if isinstance(value, list):
        return [decode(v, inputs) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (key, arg), = value.items()
        try:
            return _special(key, arg, inputs)
        except (IndexError, TypeError, ValueError, KeyError):
            raise ParamError(f"argument {value!r} does not fit the block's "
                             f"{len(inputs)} input(s)") from None
    return {k: decode(v, inputs) for k, v in value.items()}


def _special(key: str, arg: Any, inputs: tuple) -> Any:
    """A one-key object that stands for a value JSON has no word for (or the dict itself)."""
    if key == "input":
        return inputs[_index(arg)]
    if key == "size":
        return inputs[_index(arg[0])].shape[_index(arg[1], negative=True)]
    if key == "tuple":
        return tuple(decode(v, inputs) for v in arg)
    if key == "slice":
        return slice(*(decode(v, inputs) for v in arg))
    if key == "shape":
        return inputs[_index(arg)].shape
    if key == "float":
        if arg not in ("inf", "-inf", "nan"):
            raise ParamError(f"{{'float': {arg!r}}}: only 'inf', '-inf' and 'nan'")
        return float(arg)
    if key == "device":
        return inputs[_index(arg)].device
    if key == "expr":
        if not isinstance(arg, list) or not arg or arg[0] not in EXPRESSIONS:
            raise ParamError(f"{{'expr': {arg!r}}}: not one of {', '.join(EXPRESSIONS)}")
        try:
            return size_expression(arg[0], [decode(v, inputs) for v in arg[1:]])
        except SizeError as e:
            raise NodegraphError(str(e)) from None
    if key == "ellipsis":
        return Ellipsis
    if key == "dtype":
        if arg not in DTYPES:
            raise ParamError(f"{{'dtype': {arg!r}}}: not a torch dtype (float32, int64, ...)")
        return DTYPES[arg]
    if key == "function":
        return resolve(arg, "function", _kind(arg))
    return {key: decode(arg, inputs)}


EXPRESSIONS = ("add", "sub", "mul", "floordiv", "truediv", "mod", "neg", "pow", "sqrt",
               "eq", "ne", "lt", "le", "gt", "ge", "expect", "check")


class SizeError(ValueError):
    """An input size other than the one an import is valid for."""


def size_expression(op, args):
    """Size arithmetic of an imported call (`{"expr": [op, ...]}`), on ints or SymInts."""
    a = args[0]
    b = args[1] if len(args) > 1 else None
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "floordiv":
        return a // b
    if op == "truediv":
        return a / b
    if op == "mod":
        return a % b
    if op == "neg":
        return -a
    if op == "pow":
        return a ** b
    if op == "sqrt":
        return a ** 0.5
    if op in ("eq", "ne", "lt", "le", "gt", "ge"):
        return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b,
                "ge": a >= b}[op]
    if op == "expect":
        if a != b:
            raise SizeError(f"{args[2]}: got {a}")
        return a
    if op == "check":  # [check, condition, its outcome at import, message, value]
        if bool(a) != b:
            raise SizeError(str(args[2]))
        return args[3]
    raise ValueError(f"unknown size operation {op!r}")


def _index(value: Any, negative: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or (value < 0 and not negative):
        raise TypeError(f"not an index: {value!r}")
    return value


def code_named(params: dict) -> list[tuple[str, str, str]]:
    """The Python a node's params name, as (param, module:qualname, kind) for the allowlist:
    its `function` or `target`, and every {"function": ...} inside its arguments."""
    named = []
    if "function" in params:
        named.append(("function", params["function"], allowlist.FUNCTIONS))
    if "target" in params:
        named.append(("target", params["target"], allowlist.MODULES))
    for name in ("args", "kwargs", "call_kwargs"):
        named += [(name, path, _kind(path)) for path in _functions_in(params.get(name))]
    return named


def _kind(path: Any) -> str:
    """A {"function": ...} may name a torch.nn class too (timm's act_layer=nn.Hardswish)."""
    return allowlist.MODULES if allowlist.allowed(path, allowlist.MODULES) else \
        allowlist.FUNCTIONS


def _functions_in(value: Any, depth: int = 0) -> list[Any]:
    if depth > 100:  # deeper than any argument a traced module passes: refuse as a name
        return [value]
    if isinstance(value, list):
        return [f for v in value for f in _functions_in(v, depth + 1)]
    if isinstance(value, dict):
        if len(value) == 1 and "function" in value:
            return [value["function"]]
        return [f for v in value.values() for f in _functions_in(v, depth + 1)]
    return []


def _present(inputs: tuple) -> tuple:
    """The inputs up to the last connected one (optional ports left open are dropped)."""
    count = max((i + 1 for i, x in enumerate(inputs) if x is not None), default=0)
    return inputs[:count]


class OpaqueModule(nn.Module):
    """A module built from an import path and keyword arguments (or a submodule of one)."""

    def __init__(self, target: str, kwargs: dict, path: str = "", index: int | None = None,
                 call_kwargs: dict | None = None, call_args: list | None = None,
                 pick: list | None = None):
        super().__init__()
        if call_args is not None and not isinstance(call_args, list):
            raise ParamError(f"'call_args' must be a list, got {call_args!r}")
        if any(isinstance(i, bool) or not isinstance(i, int) for i in pick or ()):
            raise ParamError(f"'pick' must be a list of indices, got {pick!r}")
        self.call_args, self.pick = call_args, list(pick or ())
        cls = resolve(target, "target", allowlist.MODULES)
        if not callable(cls) or isinstance(cls, type) and not issubclass(cls, nn.Module):
            raise ParamError(f"target {target!r} is not an nn.Module class")
        kwargs = dict(decode(kwargs))
        if kwargs.get("device") is not None:  # a device pinned in the file: one we have
            devices.check_here(kwargs["device"], "its 'device' argument")
        try:
            root = cls(*kwargs.pop("*", ()), **kwargs)
        except TypeError as e:
            raise ParamError(f"{target} cannot be built with {kwargs}: {e}") from None
        if not isinstance(root, nn.Module):  # a factory (torchvision.models:resnet18)
            raise ParamError(f"target {target!r} returned a {type(root).__name__}, not an "
                             "nn.Module")
        try:
            self.module = root.get_submodule(path) if path else root
        except AttributeError:
            raise ParamError(f"{target} has no submodule {path!r}") from None
        # what a CPU copy of the whole object holds (known on meta without memory)
        self.root_bytes = sum(footprint.module_bytes(root))
        self.index = index
        self.call_kwargs = decode(call_kwargs or {})
        self.recipe = (target, kwargs, path)

    def _arguments(self, inputs: tuple) -> Any:
        """The call's positional arguments: the inputs, or `call_args` built from them
        (an LSTM's `(x, (h, c))`)."""
        if self.call_args is None:
            return _present(inputs)
        return decode(self.call_args, inputs)

    def forward(self, *inputs):
        if any(isinstance(x, torch.Tensor) and x.is_meta for x in inputs):
            self._weights_fit()
        try:
            out = self.module(*self._arguments(inputs), **self.call_kwargs)
        except (NotImplementedError, RuntimeError) as e:
            if "meta" not in str(e) or not any(isinstance(x, torch.Tensor) and x.is_meta
                                               for x in inputs):
                raise
            out = self._shapes_on_cpu(inputs)
        out = out if self.index is None else out[self.index]
        for i in self.pick:  # `_, (h, c) = lstm(x)`: h is out[1][0]
            out = out[i]
        return out

    def _weights_fit(self) -> None:
        """Shape inference refuses, before the module runs on meta tensors, one whose
        weights alone (counted on meta, from the constructor's arguments) exceed the memory
        available: the memory estimate would refuse it after the run anyway, and the run
        can cost seconds (the first comparison on meta imports torch._dynamo through
        torch's prims, and a module that reads values is then retried on a CPU copy)."""
        footprint.need(sum(footprint.module_bytes(self.module)), "kwargs", None,
                       f"the weights of {self.recipe[0]}")

    def _shapes_on_cpu(self, inputs: tuple):
        """Shape inference of a module that reads tensor values (an `if` on a sum, the
        reason it was kept whole): a CPU copy runs on zeros, and the outputs' shapes come
        back as meta tensors. The copy is made only when its weights and inputs, counted
        on meta, fit in the memory available, and stopped as soon as what it makes does not
        (`footprint.bounded_work`): validation never allocates what the estimate refuses."""
        target, kwargs, path = self.recipe
        cls = resolve(target, "target", allowlist.MODULES)
        size = self.root_bytes + footprint.tensor_bytes(inputs)
        with footprint.bounded_work(size, "kwargs", f"a CPU copy of {target} (which cannot run "
                               "on meta tensors) to learn its output shapes"), \
                torch.device("cpu"):
            kwargs = dict(kwargs)
            root = cls(*kwargs.pop("*", ()), **kwargs)
            real = root.get_submodule(path) if path else root
            zeros = tuple(torch.zeros(x.shape, dtype=x.dtype) if isinstance(x, torch.Tensor)
                          else x for x in inputs)
            with torch.no_grad():
                out = real(*self._arguments(zeros), **self.call_kwargs)

        def meta(v):
            if isinstance(v, torch.Tensor):
                return torch.empty(v.shape, dtype=v.dtype, device="meta")
            if isinstance(v, tuple) and hasattr(v, "_fields"):  # a named tuple's fields
                return type(v)(*(meta(x) for x in v))
            return type(v)(meta(x) for x in v) if isinstance(v, tuple | list) else v

        return meta(out)


class OpaqueFunction(nn.Module):
    """A call of a torch function (or tensor method) with fixed extra arguments."""

    def __init__(self, function: str, args: list, kwargs: dict, index: int | None = None):
        super().__init__()
        self.function = resolve(function, "function")
        self.args, self.kwargs, self.index = args, kwargs, index

    def forward(self, *inputs):
        # (the keyword arguments are a plain dict: `device=` is not a one-key object)
        args = decode(self.args, inputs)
        kwargs = {k: decode(v, inputs) for k, v in self.kwargs.items()}
        if any(isinstance(x, torch.Tensor) and x.is_meta for x in inputs):
            # shape inference: a tensor the call makes from its arguments (torch:ones with a
            # size from the file) is made on meta too, whatever device the file asks for,
            # so validation allocates nothing; its size counts in the memory estimate
            if "device" in kwargs:  # but the one it names is checked as the run needs it
                if kwargs["device"] is not None:
                    devices.check_here(kwargs["device"], "its 'device' argument")
                kwargs["device"] = "meta"
            with torch.device("meta"):
                out = self.function(*args, **kwargs)
        else:
            out = self.function(*args, **kwargs)
        return out if self.index is None else out[self.index]


# -- what the Python export writes: the same modules, needing only torch and the named code --


def by_path(path: str):
    """The object named ``module:qualname``, imported."""
    module_name, _, qualname = path.partition(":")
    obj = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def decoded(value, inputs):
    """A JSON argument of an imported call as its Python value ({"input": k} is input k)."""
    if isinstance(value, list):
        return [decoded(v, inputs) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) != 1:
        return {k: decoded(v, inputs) for k, v in value.items()}
    (key, arg), = value.items()
    if key == "input":
        return inputs[arg]
    if key == "size":
        return inputs[arg[0]].shape[arg[1]]
    if key == "tuple":
        return tuple(decoded(v, inputs) for v in arg)
    if key == "slice":
        return slice(*(decoded(v, inputs) for v in arg))
    if key == "shape":
        return inputs[arg].shape
    if key == "float":
        return float(arg)
    if key == "device":
        return inputs[arg].device
    if key == "expr":
        return size_expression(arg[0], [decoded(v, inputs) for v in arg[1:]])
    if key == "ellipsis":
        return Ellipsis
    if key == "dtype":
        return getattr(torch, arg)
    if key == "function":
        return by_path(arg)
    return {key: decoded(arg, inputs)}


class ImportedModule(nn.Module):
    """A module built from its import path (``torchvision.models:resnet18``) and keyword
    arguments, or one of its submodules; `index` picks one element of a tuple output."""

    def __init__(self, target, kwargs=None, path="", index=None, call_kwargs=None,
                 call_args=None, pick=()):
        super().__init__()
        kwargs = dict(kwargs or {})
        root = by_path(target)(*kwargs.pop("*", ()), **kwargs)
        self.module = root.get_submodule(path) if path else root
        self.index = index
        self.call_kwargs = call_kwargs or {}
        self.call_args, self.pick = call_args, list(pick or ())

    def forward(self, *inputs):
        count = max((i + 1 for i, x in enumerate(inputs) if x is not None), default=0)
        args = inputs[:count] if self.call_args is None else decoded(self.call_args, inputs)
        out = self.module(*args, **self.call_kwargs)
        out = out if self.index is None else out[self.index]
        for i in self.pick:
            out = out[i]
        return out


class ImportedCall(nn.Module):
    """A call of a function named ``module:qualname`` with fixed JSON arguments."""

    def __init__(self, function, args, kwargs, index=None):
        super().__init__()
        self.function = by_path(function)
        self.args, self.kwargs, self.index = args, kwargs, index

    def forward(self, *inputs):
        kwargs = {k: decoded(v, inputs) for k, v in self.kwargs.items()}
        out = self.function(*decoded(self.args, inputs), **kwargs)
        return out if self.index is None else out[self.index]


BUFFER_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16",
                 "int8", "uint8", "bool")


class StoredBuffer(nn.Module):
    """A fixed tensor whose values come with the weights (safetensors), not the file."""

    def __init__(self, shape, dtype):
        super().__init__()
        self.register_buffer("value", torch.zeros(tuple(shape), dtype=getattr(torch, dtype)))

    def forward(self):
        return self.value


class BufferParams(Params):
    shape: list[int]
    dtype: str


def _buffer(p: BufferParams, x):
    if any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in p.shape):
        raise ParamError(f"'shape' must be sizes >= 0, got {p.shape!r}")
    if p.dtype not in BUFFER_DTYPES:
        raise ParamError(f"'dtype' must be one of {', '.join(BUFFER_DTYPES)}, got {p.dtype!r}")
    return StoredBuffer(p.shape, p.dtype)


class ModuleParams(Params):
    target: str
    kwargs: Any
    path: str
    index: int | None
    call_kwargs: Any
    call_args: Any
    pick: Any


def _module_export(p: ModuleParams, x):
    return ImportedModule, {"target": p.target, "kwargs": decode(p.kwargs), "path": p.path,
                            "index": p.index, "call_kwargs": decode(p.call_kwargs),
                            "call_args": p.call_args, "pick": p.pick}


class FunctionParams(Params):
    function: str
    args: Any
    kwargs: Any
    index: int | None


def _function_export(p: FunctionParams, x):
    return ImportedCall, {"function": p.function, "args": p.args, "kwargs": p.kwargs,
                          "index": p.index}


def _importable(target: str) -> str:
    """`target`, its package made importable first where it needs help (torchvision beside
    a CPU torch, see `nodegraph.model.packages`)."""
    if allowlist.top_module(target) in ("torchvision", "timm"):
        from nodegraph.model.packages import load_torchvision

        load_torchvision()
    return target


class ArraysParams(DataParams):
    path: str
    x_key: str
    y_key: str


def _arrays(p: ArraysParams):
    x, y = read_npz(p.path, (p.x_key, p.y_key))
    if x.ndim == 0 or y.ndim == 0 or len(x) != len(y):
        raise NodegraphError(f"{p.path}: '{p.x_key}' and '{p.y_key}' must hold the same number "
                             f"of samples, got shapes {x.shape} and {y.shape}")
    data = from_arrays({"x": np.asarray(x), "y": np.asarray(y)}, p, normalize_ports=())
    for port, array in (("x", x), ("y", y)):  # a boolean mask stays a mask (~mask works)
        if np.asarray(array).dtype == np.bool_:
            for split in ("train", "val", "test"):
                if data.has(split):
                    part = data.tensors(split)
                    part[port] = part[port].bool()
    return data


def _arrays_meta(p: ArraysParams):
    """Shapes and dtypes from the arrays' headers; None where a header does not read as a
    plain numeric array (the build says why) or a stratified split needs y's values."""
    heads = npz_headers(p.path, (p.x_key, p.y_key))
    x_head, y_head = heads
    if x_head is None or y_head is None or any(d.kind not in "biuf"
                                               for _, d in (x_head, y_head)):
        return None
    (xs, _), (ys, _) = x_head, y_head
    if not xs or not ys or xs[0] != ys[0]:
        raise NodegraphError(f"{p.path}: '{p.x_key}' and '{p.y_key}' must hold the same number "
                             f"of samples, got shapes {xs} and {ys}")
    kinds = {"i": torch.int64, "u": torch.int64, "b": torch.bool}
    ports = {k: (shape[1:], kinds.get(d.kind, torch.float32))
             for k, (shape, d) in (("x", x_head), ("y", y_head))}
    return sized(ports, xs[0], p)


def _module(p: ModuleParams, x) -> OpaqueModule:
    return OpaqueModule(_importable(p.target), p.kwargs, p.path, p.index, p.call_kwargs,
                        p.call_args, p.pick)


def _function(p: FunctionParams, x) -> OpaqueFunction:
    return OpaqueFunction(p.function, p.args, p.kwargs, p.index)


BLOCKS = [
    op("opaque.Module",
       "A PyTorch module named by its import path, run as it is.\n\n"
       "Builds `target` (module:Class) with the JSON `kwargs`; with `path`, builds it and "
       "takes that submodule. Its weights are saved like any block's, under "
       "node.module.*. `nodegraph import` puts here what no block of the library "
       "expresses. torch.nn classes build anywhere; a class of another module only in a "
       "graph the user trusts (--trust, or the editor's prompt).",
       _module,
       inputs=INPUTS, outputs=["output"],
       params=[str_param("target", doc="the class, as module:QualName "
                         "(torch.nn:TransformerEncoderLayer)"),
               Param("kwargs", "json", {}, "keyword arguments of its constructor"),
               str_param("path", "", "a submodule of the built object, dotted "
                         "(encoder.layers.0); empty means the object itself"),
               int_param("index", None, "when the module returns a tuple: the element that "
                         "is the output; empty means all of it", min=0, nullable=True),
               Param("call_kwargs", "json", {}, "constant keyword arguments of each call "
                     "(need_weights=False)"),
               Param("call_args", "json", None, "positional arguments built from the "
                     "inputs, e.g. [{\"input\": 0}, {\"tuple\": [{\"input\": 1}, "
                     "{\"input\": 2}]}] for lstm(x, (h, c)); empty means the inputs "
                     "in order"),
               Param("pick", "json", [], "indices into the output after `index`: [0] "
                     "with index 1 is h of an LSTM's (out, (h, c))")],
       keywords=("imported", "custom", "fx", "module"), code=code_named,
       export=_module_export),
    op("opaque.Function",
       "A call of a torch function or tensor method with fixed extra arguments.\n\n"
       "`function` is module:qualname (torch:mean, torch:Tensor.transpose, operator:add); "
       "`args` and `kwargs` are JSON, with {\"input\": k} for input k and "
       "{\"size\": [k, d]} for its size in dim d, {\"expr\": [op, a, b]} for size "
       "arithmetic that follows the input. Made by `nodegraph import` for "
       "operations no block expresses.",
       _function,
       inputs=INPUTS, outputs=["output"],
       params=[str_param("function", doc="what to call, as module:qualname"),
               Param("args", "json", [{"input": 0}], "positional arguments"),
               Param("kwargs", "json", {}, "keyword arguments"),
               int_param("index", None, "when the call returns a tuple (chunk, split, "
                         "unbind): the element that is the output", min=0,
                         nullable=True)],
       keywords=("imported", "function", "fx", "call"), code=code_named,
       export=_function_export),
    op("opaque.Buffer",
       "A fixed tensor stored with the weights, with no inputs.\n\n"
       "A buffer a module reads in forward (a causal mask, a relative-position index, "
       "a rotary table) too large to write into the graph file: its values travel in "
       "the weights file under node.value; it is not trained. Made by `nodegraph "
       "import`.",
       _buffer, inputs=(), outputs=["output"],
       params=[Param("shape", "ints", doc="shape of the tensor", min=0),
               str_param("dtype", "float32", "element type (float32, int64, bool, ...)")],
       keywords=("imported", "buffer", "mask", "table", "fixed")),
    data("opaque.Arrays",
         "Arrays from an .npz archive with their dtypes: the example inputs of an imported "
         "module.\n\nx is the array `x_key`, y the array `y_key` (nodegraph import stores "
         "the module's own output there); integer arrays stay integers, boolean ones "
         "booleans, others become float32, and no normalisation is applied.",
         _arrays, meta=_arrays_meta,
         outputs=[Port("x", doc="the inputs"), Port("y", doc="the reference outputs")],
         params=[str_param("path", doc="the .npz archive"),
                 str_param("x_key", "x", "name of the input array"),
                 str_param("y_key", "y", "name of the output array"),
                 *data_params(batch_size=0, shuffle=False)],
         keywords=("npz", "example inputs", "imported")),
]
