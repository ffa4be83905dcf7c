"""The torch.export front end: a module captured by `torch.export`, its ATen ops as torch calls.

torch.fx stops at much of what Hugging Face models do (decorators reading `**kwargs`,
`ModelOutput` dataclasses, cache objects); `torch.export.export(..., strict=False)` runs
forward on fake tensors instead and records every ATen op, with dynamic batch and
sequence/spatial sizes (`Dim.AUTO`). The captured graph is written back as the kind of
graph the fx front end makes, so the shared back end (planner, guards, weights, check,
groups, layout) applies unchanged:

- an ATen op becomes the torch function or Tensor method it implements (`aten.addmm` ->
  `torch.addmm`, `aten.view` -> `Tensor.view`, `aten.slice` -> indexing), which the
  planner maps to a block where the library has one, else to an opaque function;
- a call of a weight layer the library has a block for (`nn.Linear`, `nn.Conv2d`,
  `nn.LayerNorm`, `nn.Embedding`, ...) made with that module's own weights becomes a
  call of that module again, so it becomes that block with its weights;
- a size read (`aten.sym_size`) becomes `x.size(d)`, so size arithmetic stays an
  expression of the inputs; a tensor made on a device is made on the first input's;
- each node's `nn_module_stack` names the module whose forward made it, as fx's does,
  so the module hierarchy becomes nested groups named by scope.
"""

from __future__ import annotations

import contextlib
import inspect
import operator
from collections.abc import Callable, Iterator
from typing import Any, cast

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

from nodegraph.interop.importing.naming import _where
from nodegraph.model.errors import NodegraphError

# ATen ops that check or assert only: no node
DROPPED = {"_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size",
           "_assert_async", "sym_constrain_range", "_check_is_size"}
# ATen ops that pass their tensor on unchanged
ALIASES = {"alias", "lift_fresh_copy", "detach_", "_unsafe_view_", "clone_"}
# Tensor methods the planner reads as methods (reshapes: `layers.Reshape`, `layers.Permute`)
METHODS = {"view", "reshape", "permute", "expand", "contiguous", "new_ones", "new_zeros",
           "new_full", "new_empty", "repeat", "type_as", "expand_as", "clone", "size",
           "masked_fill", "float", "long", "bool", "int"}
# ATen ops named differently in torch (name -> the torch-level function)
RENAMED: dict[str, Callable[..., Any]] = {
    "linear": F.linear, "conv1d": F.conv1d, "conv2d": F.conv2d, "conv3d": F.conv3d,
    "conv_transpose1d": F.conv_transpose1d, "conv_transpose2d": F.conv_transpose2d,
    "silu": F.silu, "gelu": F.gelu, "mish": F.mish, "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid, "elu": F.elu, "leaky_relu": F.leaky_relu,
    "softplus": F.softplus, "scaled_dot_product_attention": F.scaled_dot_product_attention,
    "max_pool2d": F.max_pool2d, "avg_pool2d": F.avg_pool2d, "max_pool1d": F.max_pool1d,
    "adaptive_avg_pool2d": F.adaptive_avg_pool2d, "adaptive_avg_pool1d": F.adaptive_avg_pool1d,
    "pad": F.pad, "one_hot": F.one_hot, "pixel_shuffle": F.pixel_shuffle,
    "_softmax": torch.softmax, "_log_softmax": torch.log_softmax, "__and__": operator.and_,
    "__or__": operator.or_, "__not__": operator.not_, "bitwise_not": torch.bitwise_not,
}
# keyword arguments of factories that name a place or layout rather than a value
PLACEMENT = ("layout", "pin_memory", "memory_format", "non_blocking")
# weight layers whose one ATen op, made with the module's own weights, is the module's call
MODULE_OPS: dict[str, tuple[type, ...]] = {
    "linear": (nn.Linear,), "conv1d": (nn.Conv1d,), "conv2d": (nn.Conv2d,),
    "conv3d": (nn.Conv3d,), "layer_norm": (nn.LayerNorm,), "group_norm": (nn.GroupNorm,),
    "embedding": (nn.Embedding,), "conv_transpose2d": (nn.ConvTranspose2d,),
    "_native_batch_norm_legit_no_training": (nn.modules.batchnorm._BatchNorm,),
}
LARGE = 2 ** 62  # a slice's end at or past this: to the end


def export_trace(root: nn.Module, inputs: tuple) -> torch.fx.GraphModule:
    """The module captured with torch.export (batch and other sizes dynamic where the
    module allows) as an fx graph of torch calls over `root`'s own submodules and weights."""
    from torch.export import Dim

    names = _argument_names(root)
    constants = {"use_cache": False} if "use_cache" in names[len(inputs):] else {}
    # (a Hugging Face cache is state for generation, not an output)
    shapes: Any = tuple({d: Dim.AUTO for d in range(x.ndim)} for x in inputs)
    if constants:
        shapes = {**dict(zip(names, shapes, strict=False)), **dict.fromkeys(constants)}
    try:
        with _without_cache(root):
            program = torch.export.export(root, tuple(inputs), kwargs=constants or None,
                                          dynamic_shapes=shapes, strict=False)
    except Exception as e:
        text = " ".join(str(e).split())[:300]
        raise NodegraphError(f"{type(root).__name__}.forward cannot be exported{_where(e)}: "
                             f"{type(e).__name__}: {text}") from None
    return _Rewriter(root, program.module(), constants).run()


@contextlib.contextmanager
def _without_cache(root: nn.Module) -> Iterator[None]:
    """Every Hugging Face config under `root` with `use_cache` off while it is exported.

    A wrapper (`self.m(ids).last_hidden_state`) cannot pass `use_cache=False`, and the
    model reads its default from its config: the cache it then builds (empty tensors
    made in forward, lifted as constants of no module) is state for generation that
    the wrapper's output does not use."""
    configs: dict[int, Any] = {id(c): c for m in root.modules()
                               if getattr(c := getattr(m, "config", None), "use_cache",
                                          None) is True}
    for config in configs.values():
        config.use_cache = False
    try:
        yield
    finally:
        for config in configs.values():
            config.use_cache = True


def _argument_names(root: nn.Module) -> list[str]:
    try:
        return list(inspect.signature(root.forward).parameters)
    except (TypeError, ValueError):
        return []


class _Rewriter:
    """One exported graph written again as torch calls (see the module's docstring)."""

    def __init__(self, root: nn.Module, exported: torch.fx.GraphModule,
                 constants: dict[str, Any]):
        self.root, self.exported, self.constants = root, exported, constants
        self.graph = torch.fx.Graph()
        self.env: dict[torch.fx.Node, Any] = {}
        self.first: torch.fx.Node | None = None  # the first input (a device comes from it)
        self.device: torch.fx.Node | None = None
        self.current: torch.fx.Node | None = None  # the node being written (its meta)
        self.whole: set[torch.fx.Node] = set()  # module calls standing for a tuple's [0]
        # tensors forward makes (`torch.tensor([...])`), lifted by export as constants of
        # the module that made them: no attribute of `root`, so kept beside it
        self.lifted: dict[str, torch.Tensor] = {}
        self.raw: dict[torch.fx.Node, Any] = {}  # a region's input -> the node passed in

    def _attributes(self) -> dict[str, Any]:
        """Every module and tensor the graph names, from `root` or the lifted constants
        (fx's GraphModule copies them from a module only when that module has them all)."""
        return {n.target: self.lifted[n.target] if n.target in self.lifted else
                _attribute(self.root, n.target) for n in self.graph.nodes
                if n.op in ("call_module", "get_attr")}

    def run(self) -> torch.fx.GraphModule:
        for node in self.exported.graph.nodes:
            self.current = node
            if node.op == "placeholder" and node.target in self.constants:
                self.env[node] = self.constants[node.target]  # (use_cache=False)
            elif node.op == "placeholder":
                self.env[node] = self._emit("placeholder", node.target, (), {})
                self.first = self.first or self.env[node]
            elif node.op == "get_attr":
                self.env[node] = self._get_attr(node)
            elif node.op == "call_module":
                if not str(node.target).startswith("_guards"):
                    raise NodegraphError(f"the exported graph calls '{node.target}', which "
                                         "the import cannot follow")
            elif node.op == "output":
                outs = torch.fx.node.map_arg(node.args[0], self.env.__getitem__)
                self.graph.output(tuple(outs) if isinstance(outs, list) else outs)
            else:
                self.env[node] = self._call(node)
        traced = torch.fx.GraphModule(self._attributes() if self.lifted else self.root,
                                      self.graph)
        traced.training = self.root.training
        traced.graph.eliminate_dead_code()
        traced.recompile()
        traced.meta["size_checks"], traced.meta["size_check_trees"] = [], []
        traced.meta["tracer"] = "export"
        return traced

    def _get_attr(self, node: torch.fx.Node) -> Any:
        target = str(node.target)
        if not _has_attribute(self.root, target):
            value = _attribute(self.exported, target)
            if isinstance(value, torch.fx.GraphModule):  # a region's body (see _region)
                return value
            self.lifted[target] = value  # a constant forward made
        return self._emit("get_attr", target, (), {})

    def _region(self, node: torch.fx.Node, args: list) -> tuple:
        """`with torch.no_grad():` in forward (export's `wrap_with_set_grad_enabled`): the
        region's ops written in line, its outputs detached where it turned gradients off
        (what leaves a no-grad region has no history: a frozen backbone stays frozen)."""
        enabled, body, operands = args[0], args[1], args[2:]
        inner = [n for n in body.graph.nodes if n.op == "placeholder"]
        for placeholder, raw, value in zip(inner, node.args[2:], operands, strict=True):
            self.env[placeholder] = value
            self.raw[placeholder] = raw  # (a weight passed in is still its module's)
        outer, outs = self.current, cast(Any, ())
        for each in body.graph.nodes:
            self.current = each
            if each.op == "output":
                outs = torch.fx.node.map_arg(each.args[0], self.env.__getitem__)
            elif each.op == "get_attr":
                raise NodegraphError(f"the exported graph reads '{each.target}' inside a "
                                     f"region of forward{_line_of(node)}, which the import "
                                     "cannot follow")
            elif each.op != "placeholder":
                self.env[each] = self._call(each)
        self.current = outer
        if enabled:
            return tuple(outs)
        return tuple(self._emit("call_method", "detach", (o,), {})
                     if isinstance(o, torch.fx.Node) else o for o in outs)

    def _emit(self, op: str, target: Any, args: tuple, kwargs: dict) -> torch.fx.Node:
        made = self.graph.create_node(op, target, args, kwargs)
        node = self.current
        if node is not None:
            if node.meta.get("stack_trace"):
                made.meta["stack_trace"] = node.meta["stack_trace"]
            stack = node.meta.get("nn_module_stack") or {}
            made.meta["nn_module_stack"] = {
                path: (path, kind) for path, kind in stack.values()
                if path and not str(path).startswith("_empty_nn_module_stack")}
        return made

    def _device(self) -> torch.fx.Node | None:
        if self.device is None and self.first is not None:
            self.device = self._emit("call_function", getattr, (self.first, "device"), {})
        return self.device

    def _call(self, node: torch.fx.Node) -> Any:
        args = torch.fx.node.map_arg(node.args, self.env.__getitem__)
        kwargs = dict(torch.fx.node.map_arg(node.kwargs, self.env.__getitem__))
        target = node.target
        if target is torch.ops.higher_order.wrap_with_set_grad_enabled:
            return self._region(node, list(args))
        if not isinstance(target, torch._ops.OpOverload):
            if target is operator.getitem and isinstance(args[0], tuple):
                return args[0][cast(int, args[1])]  # an output of a region written in line
            if target is operator.getitem and args[0] in self.whole and args[1] == 0:
                return args[0]  # batch norm's output: the module's call itself
            return self._emit("call_function", target, tuple(args), dict(kwargs))
        name = target.__name__.split(".")[0]
        if name in DROPPED:
            return None
        if name in ALIASES:
            return args[0]
        module = self._module_call(node, name, args)
        if module is not None:
            return module
        for key in PLACEMENT:
            kwargs.pop(key, None)
        # a device (a factory's, `to`'s): the first input's, so the graph runs where it is
        args = torch.fx.node.map_aggregate(args, self._placed)
        kwargs = dict(torch.fx.node.map_aggregate(kwargs, self._placed))
        return self._translated(node, name, list(args), kwargs)

    def _placed(self, value: Any) -> Any:
        return self._device() if isinstance(value, torch.device) else value

    def _translated(self, node: torch.fx.Node, name: str, args: list, kwargs: dict) -> Any:
        call = self._emit
        if name == "sym_size":
            return call("call_method", "size", tuple(args), {})
        if name == "dropout":
            train = args[2] if len(args) > 2 else kwargs.get("train", False)
            if not train:
                return args[0]
            return call("call_function", F.dropout, (args[0], args[1], True), {})
        if name == "slice":
            return self._slice(args, kwargs)
        if name == "diff" and (args[1] if len(args) > 1 else 1) == 1 and not kwargs:
            return self._diff(args)  # (ONNX has no diff: the difference of two slices)
        if name == "cumsum" and _dtype(node.args[0]) == torch.bool:  # as torch sums them:
            args[0] = call("call_method", "long", (args[0],), {})  # (ONNX sums no bools)
        if name == "select":
            x, dim, index = args
            return call("call_function", operator.getitem,
                        (x, (*[slice(None)] * dim, index)), {})
        if name == "index":
            return call("call_function", operator.getitem, (args[0], tuple(args[1])), {})
        if name == "embedding":
            return call("call_function", F.embedding, (args[1], args[0]), {})
        if name in ("layer_norm", "group_norm"):
            norm: Any = F.layer_norm if name == "layer_norm" else F.group_norm
            return call("call_function", norm, tuple(args[:5]), {})
        if name in ("softmax", "log_softmax", "_softmax", "_log_softmax"):
            soft: Any = torch.softmax if "log" not in name else torch.log_softmax
            return call("call_function", soft, (args[0], args[1]), {})
        if name == "gelu":
            approximate = kwargs.get("approximate", args[1] if len(args) > 1 else "none")
            return call("call_function", F.gelu, (args[0],),
                        {} if approximate == "none" else {"approximate": approximate})
        if name == "_native_batch_norm_legit_no_training":
            x, w, b, mean, var, momentum, eps = args
            made = call("call_function", F.batch_norm, (x, mean, var, w, b, False, momentum,
                                                        eps), {})
            self.whole.add(made)
            return made
        if name in ("upsample_nearest2d", "upsample_bilinear2d"):
            mode = "nearest" if "nearest" in name else "bilinear"
            extra = {"align_corners": args[2]} if mode == "bilinear" else {}
            scale = args[-1]
            return call("call_function", F.interpolate, (args[0],), {
                "size": args[1], "scale_factor": scale, "mode": mode, **extra})
        if name == "_weight_norm":  # a parametrized weight_norm (wav2vec2's position conv)
            return self._weight_norm(node, args, kwargs)
        if name == "linalg_vector_norm" and not kwargs.get("dtype"):  # F.normalize's norm
            order, dim, keep = (args[1:] + [2, None, False][len(args) - 1:])[:3]
            return call("call_method", "norm", (args[0], order, dim, keep), {})
        if name == "to" or name == "_to_copy":
            kwargs.pop("device", None)
            if not kwargs and len(args) == 1:
                return args[0]
            return call("call_method", "to", tuple(args), kwargs)
        if name in RENAMED:
            return call("call_function", RENAMED[name], tuple(args), kwargs)
        if name in METHODS or not hasattr(torch, name) and hasattr(torch.Tensor, name):
            return call("call_method", name, tuple(args), kwargs)
        fn = getattr(torch, name, None) or getattr(F, name, None)
        if callable(fn):
            return call("call_function", fn, tuple(args), kwargs)
        where = _line_of(node)
        raise NodegraphError(f"the exported graph calls {node.target}{where}, which has "
                             "no torch function or Tensor method of that name")

    def _weight_norm(self, node: torch.fx.Node, args: list, kwargs: dict) -> torch.fx.Node:
        """torch._weight_norm(v, g, dim) (private: no graph file may name it) as what it
        computes, v * (g / |v|), the norm over every dim but `dim` (all of them for -1)."""
        v, g = args[0], args[1]
        dim = args[2] if len(args) > 2 else kwargs.get("dim", 0)
        ndim = node.args[0].meta["val"].ndim  # type: ignore[union-attr]
        over = [d for d in range(ndim) if dim == -1 or d != dim % ndim]
        norm = self._emit("call_method", "norm", (v, 2, over, True), {})
        scale = self._emit("call_function", torch.div, (g, norm), {})
        return self._emit("call_function", torch.mul, (v, scale), {})

    def _slice(self, args: list, kwargs: dict) -> Any:
        x = args[0]
        dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
        start = args[2] if len(args) > 2 else kwargs.get("start")
        end = args[3] if len(args) > 3 else kwargs.get("end")
        step = args[4] if len(args) > 4 else kwargs.get("step", 1)
        if isinstance(end, int) and end >= LARGE:
            end = None
        if start in (None, 0) and end is None and step == 1:
            return x
        return self._index(x, dim, slice(start, end, None if step == 1 else step))

    def _diff(self, args: list) -> torch.fx.Node:
        """torch.diff(x, 1, dim, prepend, append) as x[1:] - x[:-1] along dim."""
        x, dim = args[0], args[2] if len(args) > 2 else -1
        prepend, append = (args[3:] + [None, None])[:2]
        if prepend is not None or append is not None:
            parts = [p for p in (prepend, x, append) if p is not None]
            x = self._emit("call_function", torch.cat, (parts, dim), {})
        later = self._index(x, dim, slice(1, None))
        earlier = self._index(x, dim, slice(None, -1))
        return self._emit("call_function", torch.sub, (later, earlier), {})

    def _index(self, x: Any, dim: int, part: slice) -> torch.fx.Node:
        """`x[..., part, ...]` with `part` in dim `dim`."""
        where = (Ellipsis, part, *[slice(None)] * (-dim - 1)) if dim < 0 else \
            (*[slice(None)] * dim, part)
        return self._emit("call_function", operator.getitem, (x, where), {})

    def _module_call(self, node: torch.fx.Node, name: str, args: tuple) -> Any:
        """The call of the weight layer that made this op with its own weights, or None."""
        kinds = MODULE_OPS.get(name)
        stack = node.meta.get("nn_module_stack") or {}
        if kinds is None or not stack:
            return None
        path = list(stack.values())[-1][0]
        try:
            module = self.root.get_submodule(path)
        except AttributeError:
            return None
        if not isinstance(module, kinds) or not _own_forward(module):
            return None
        weight_at = {"embedding": 0, "layer_norm": 2, "group_norm": 2}.get(name, 1)
        source_at = 1 if name == "embedding" else 0
        raw = node.args
        if len(raw) <= weight_at or not self._is_own(raw[weight_at], module, "weight"):
            return None
        bias_at = weight_at + 1
        bias = raw[bias_at] if len(raw) > bias_at else None
        if name != "embedding" and not (bias is None and getattr(module, "bias", None) is None
                                        or self._is_own(bias, module, "bias")):
            return None
        made = self._emit("call_module", path, (args[source_at],), {})
        if name.startswith("_native_batch_norm"):
            self.whole.add(made)
        return made

    def _is_own(self, arg: Any, module: nn.Module, attribute: str) -> bool:
        arg = self.raw.get(arg, arg)
        if not isinstance(arg, torch.fx.Node) or arg.op != "get_attr":
            return False
        owner, _, last = str(arg.target).rpartition(".")
        try:
            value = getattr(self.root.get_submodule(owner) if owner else self.root, last)
        except AttributeError:
            return False
        return value is getattr(module, attribute, None)


def _own_forward(module: nn.Module) -> bool:
    """Whether `module` runs the forward of the torch layer it is: a subclass with a
    forward of its own (transformers' ConvNextLayerNorm permutes around the norm) is not
    that layer's call, its op alone is."""
    return getattr(type(module).forward, "__module__", "").startswith("torch.nn.")


def _attribute(module: nn.Module, target: str) -> Any:
    owner, _, name = target.rpartition(".")
    return getattr(module.get_submodule(owner) if owner else module, name)


def _has_attribute(module: nn.Module, target: str) -> bool:
    try:
        _attribute(module, target)
    except AttributeError:
        return False
    return True


def _dtype(value: Any) -> torch.dtype | None:
    """The dtype export recorded for a node's value, if any."""
    fake = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
    return getattr(fake, "dtype", None)


def _line_of(node: torch.fx.Node) -> str:
    from nodegraph.interop.importing.naming import _line

    return _line(node)
