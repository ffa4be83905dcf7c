"""The torch.fx front end: a module traced into an fx graph of torch-level calls.

Modules the library maps, torch.nn modules and the `--leaf` ones stay one call; a
submodule fx cannot follow is kept whole, found by tracing again. Size checks of forward
(`if H != W:`) are decided on the example inputs and recorded for the guards.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import inspect
import traceback
from collections.abc import Iterable
from typing import Any

import torch
import torch.fx
from torch import nn

from nodegraph.interop.importing.blocks import MAX_CONSTANT, _equivalents
from nodegraph.interop.importing.naming import _line, _owner, _where, callable_path
from nodegraph.interop.importing.values import _check_tree, _leaves, _sizes_only
from nodegraph.model.errors import NodegraphError

# the cautious trace: buffers read as plain tensors and a module that reads a big one kept
# whole, as before issue #26 — taken when the full trace stops or does not give the
# module's numbers (`if self.initialized:` on a buffer's value, a cache of a tensor made
# from buffers kept across calls)
_CAUTIOUS: contextvars.ContextVar[bool] = contextvars.ContextVar("cautious", default=False)


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
        self._grad_at_start = torch.is_grad_enabled()

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        """Each node made while forward turned gradients off (`with torch.no_grad():`,
        which fx runs but does not record) is marked, for `_detach_no_grad_regions`."""
        node = super().create_node(kind, target, args, kwargs, name, type_expr)
        if self._grad_at_start and not torch.is_grad_enabled() and kind in (
                "call_function", "call_method", "call_module"):
            node.meta["grad_off"] = True
        return node

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
    _detach_no_grad_regions(traced.graph)
    traced.graph.eliminate_dead_code()  # an unused tuple element (`out, _ = lstm(x)`)
    traced.recompile()
    return traced


def _detach_no_grad_regions(graph: torch.fx.Graph) -> None:
    """A value made under `torch.no_grad()` and used after it is detached there: what
    leaves a no-grad region has no history, so a frozen backbone (`with torch.no_grad():
    feats = self.backbone(x)`) gets no gradient from the graph either, and neither does
    anything before it (as export's `wrap_with_set_grad_enabled` regions, `exporting`)."""
    for node in list(graph.nodes):
        if not node.meta.get("grad_off"):
            continue
        outside = [u for u in node.users if not u.meta.get("grad_off")]
        if not outside:
            continue
        with graph.inserting_after(node):
            detached = graph.call_method("detach", (node,))
        for key in ("stack_trace", "nn_module_stack"):
            if key in node.meta:
                detached.meta[key] = node.meta[key]
        for user in outside:
            user.replace_input_with(node, detached)


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
