"""How a block declares itself, and the registry that holds the declarations.

A block is one `BlockSpec`: id, kind, doc, typed ports, typed params and a `build` function.
Everything else — the editor's palette and inspector, validation, shape inference, the docs,
`nodegraph blocks` — reads that one declaration. Adding a block never touches `nodegraph/`.

What `build` receives and returns depends on the block's kind:

`p`, the params by name, is a `Params` dict that a build reads through its block's typed
view, a `Params` subclass with one annotation per param (``def build(p: LinearParams, x)``,
then ``p.out_features`` is an int to mypy); docs/writing-blocks.md shows one.

- ``op``: ``build(p, x) -> nn.Module``. `p` holds the params by name, `x` maps each connected
  input port to a *meta* tensor of the inferred shape and dtype (so a Linear reads
  ``x["input"].shape[-1]``). The module is called with the inputs positionally in port
  order (``None`` for an unconnected optional input) and returns one tensor, or a tuple in
  output-port order. Losses are ops whose output port has type ``loss``.
- ``data``: ``build(p) -> nodegraph.kinds.dataset.Dataset``: the whole dataset with its splits.
- ``metric``: ``build(p, x) -> nodegraph.kinds.metric.Metric``: accumulates over an epoch.
- ``optimizer``: ``build(p, named) -> torch.optim.Optimizer`` over `named`, a list of
  (``node.param``, Parameter); pass it through ``nodegraph.kinds.optim.param_groups(named, p)``.
  With ``closure=True`` the trainer calls ``step(closure)``; ``closure()`` zeroes the grads,
  recomputes the loss, backpropagates and returns it (L-BFGS); ``closure(backward=False)``
  returns the loss with its autograd graph and no backward, for solvers that differentiate
  it themselves (a one-step Newton solve is exact least squares).
- ``schedule``: ``build(p, optimizer) -> torch.optim.lr_scheduler.LRScheduler``.
- ``transform``: ``build(p) -> nodegraph.kinds.augment.Step``: one per-sample transform
  (augmentation) of a data block, chained into its ``augment`` input.
- ``procedure``: ``build(p) -> nodegraph.runtime.procedure.Procedure``: a loop around a trained
  node or group (named by its `model` param) that yields a trajectory; not part of training.

Params that name other nodes have the kinds ``node`` (one id) and ``nodes`` (a list), with
``of=`` the block kinds they may name (`node_param`, `nodes_param`); ``stage`` names a
training stage. Renaming a node rewrites them, validation checks them, the inspector offers
the graph's nodes for them (`nodegraph.model.references`).

A block that acts on *other blocks' weights* (an L1/L2 penalty, a parameter count) declares
``binds="nodes"``: the name of its ``nodes`` param (empty: every block with weights). After
building, compile calls ``module.bind(modules)`` with those nodes' modules by id; the block
must keep them without registering them as submodules (so weights are not duplicated). A
procedure declares ``binds="model"``: the runner hands the named node to its context.

An op block whose module is a `nodegraph.kinds.estimator.Estimator` (a decision tree, a
k-NN classifier: `nodes/estimators.py`) learns by a fit on the whole train split when a run
starts, not from an optimizer; it is still an op, so it validates, wires and feeds metrics
like one.

An op block whose module is built from large tensors computed from its params (a Hopfield
network's weight matrix from its patterns) declares ``export=fn``: ``fn(p, x)`` returns a
plain function and keyword arguments that build the same module, and the Python export
writes that call instead of the recorded constructor call.

The registry is an object: tests make their own, the default one holds the blocks of the
`nodes` package plus any package that declares the ``nodegraph.blocks`` entry point.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from nodegraph.model.errors import NodegraphError, ParamError
from nodegraph.model.types import LOSS, SCHEDULE, TENSOR, TRANSFORM, PortType

KINDS = ("op", "data", "metric", "optimizer", "schedule", "group", "procedure", "transform")
# positional arguments `build` receives, by kind (typed in `nodegraph.kinds`)
BUILD_ARGS = {"op": 2, "data": 1, "metric": 2, "optimizer": 2, "schedule": 2, "procedure": 1,
              "transform": 1}
# node views a port may ask for: "trajectory", a recall's states per step (beside an
# "energy" output); "attention", attention weights (N[, heads], L, S) as heat maps
VIEWS = ("trajectory", "attention")
BLOCK_ID = re.compile(r"^[a-z][a-z0-9_]*\.[A-Za-z][A-Za-z0-9_]*$")
NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class _Required:
    """Marker default for a param the user must set."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Port:
    """A typed input or output of a block."""

    name: str
    type: PortType = TENSOR
    doc: str = ""
    optional: bool = False  # inputs only: the block runs without it (it receives None)
    # outputs only: the editor's node views that show this port, by name (VIEWS)
    views: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = set(self.views) - set(VIEWS)
        if unknown:
            raise ValueError(f"port {self.name}: unknown views {sorted(unknown)} (known: "
                             f"{', '.join(VIEWS)})")


T = TypeVar("T")
V_co = TypeVar("V_co", covariant=True)  # a Param[list[int]] is a Param[Sequence[int]]


@dataclass(frozen=True)
class Param(Generic[V_co]):
    """A typed, named setting of a block, with its default and the values it allows.

    `T` is the Python type of its checked value (`int_param` makes a ``Param[int]``), so a
    build that reads it through the param object, ``p.typed(OUT_FEATURES)``, is type-checked
    as reading an int; ``p.maybe(...)`` for a nullable param gives ``T | None``.
    """

    name: str
    # int | float | bool | str | choice | ints | floats | strs | json, or a reference:
    # node (a node id) | nodes (a list of node ids) | stage (a training stage's name)
    kind: str
    default: Any = REQUIRED
    doc: str = ""
    min: float | None = None
    max: float | None = None
    choices: tuple = ()
    nullable: bool = False  # None is allowed (meaning "infer" or "off")
    # node and nodes only: the block kinds a named node may have ("op", "metric", "group",
    # ...); empty: any node
    of: tuple[str, ...] = ()
    # may change while a run trains: the editor sends the new value to the run, which
    # applies it from its next step and records it in its history (an optimizer's lr)
    live: bool = False

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def names_nodes(self) -> bool:
        """The value names nodes of the graph: renaming a node rewrites it, validation
        checks that they exist, the inspector offers the graph's nodes."""
        return self.kind in REFERENCE_KINDS

    def check(self, value: Any) -> Any:
        """Return `value` in canonical form, or raise ParamError saying what was expected."""
        if value is None:
            if self.nullable:
                return None
            raise ParamError(f"'{self.name}' needs a value ({self.describe()})")
        checker = _CHECKERS.get(self.kind)
        if checker is None:
            raise ParamError(f"'{self.name}' has unknown param kind {self.kind!r}")
        value = checker(self, value)
        if self.kind in ("int", "float"):
            self._check_range(value)
        elif self.kind in ("ints", "floats"):
            for v in value:
                self._check_range(v)
        return value

    def _check_range(self, v: float) -> None:
        if self.min is not None and v < self.min:
            raise ParamError(f"'{self.name}' must be >= {self.min}, got {v}")
        if self.max is not None and v > self.max:
            raise ParamError(f"'{self.name}' must be <= {self.max}, got {v}")

    def describe(self) -> str:
        """A short statement of what values are allowed, for messages and the inspector."""
        if self.kind == "choice":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        text = {"int": "an integer", "float": "a number", "bool": "true or false",
                "str": "text", "ints": "a list of integers", "floats": "a list of numbers",
                "strs": "a list of texts", "json": "a JSON value",
                "node": "a node id", "nodes": "a list of node ids",
                "stage": "the name of a training stage"}.get(self.kind, self.kind)
        if self.of:
            text += " (" + " or ".join(self.of) + ")"
        if self.min is not None and self.max is not None:
            text += f" in [{self.min}, {self.max}]"
        elif self.min is not None:
            text += f" >= {self.min}"
        elif self.max is not None:
            text += f" <= {self.max}"
        return text + (" or null" if self.nullable else "")

    def to_dict(self) -> dict:
        d = {"name": self.name, "kind": self.kind, "doc": self.doc,
             "required": self.required, "allowed": self.describe()}
        if not self.required:
            d["default"] = self.default
        if self.choices:
            d["choices"] = list(self.choices)
        if self.min is not None:
            d["min"] = self.min
        if self.max is not None:
            d["max"] = self.max
        if self.of:
            d["of"] = list(self.of)
        return d


def _wrong(param: Param, value: Any) -> ParamError:
    shown = repr(value) if not isinstance(value, str) else f"the text {value!r}"
    return ParamError(f"'{param.name}' must be {param.describe()}, got {shown}")


INT_LIMIT = 2**63  # torch and numpy take 64-bit integers; a larger one fails deep in a run


def _check_int(p: Param, v: Any) -> int:
    if (isinstance(v, bool) or not isinstance(v, int | float)
            or (isinstance(v, float) and not v.is_integer())):  # NaN and inf too
        raise _wrong(p, v)
    if not -INT_LIMIT <= v < INT_LIMIT:
        raise ParamError(f"'{p.name}' must be a 64-bit integer (-2**63 to 2**63-1, what torch "
                         f"and numpy take), got a number of {int(abs(v)).bit_length()} bits")
    return int(v)


def _check_float(p: Param, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise _wrong(p, v)
    return float(v)


def _check_bool(p: Param, v: Any) -> bool:
    if not isinstance(v, bool):
        raise _wrong(p, v)
    return v


def _check_str(p: Param, v: Any) -> str:
    if not isinstance(v, str):
        raise _wrong(p, v)
    return v


def _check_choice(p: Param, v: Any) -> Any:
    if v not in p.choices:
        raise _wrong(p, v)
    return v


def _check_list(item: Callable[[Param, Any], Any]) -> Callable[[Param, Any], list]:
    def check(p: Param, v: Any) -> list:
        if not isinstance(v, list | tuple):
            raise _wrong(p, v)
        try:
            return [item(p, x) for x in v]
        except ParamError:
            raise _wrong(p, v) from None

    return check


def _check_json(p: Param, v: Any) -> Any:
    if not isinstance(v, dict | list | str | int | float | bool):
        raise _wrong(p, v)
    return v


_CHECKERS: dict[str, Callable[[Param, Any], Any]] = {
    "int": _check_int, "float": _check_float, "bool": _check_bool, "str": _check_str,
    "choice": _check_choice, "ints": _check_list(_check_int),
    "floats": _check_list(_check_float), "strs": _check_list(_check_str), "json": _check_json,
    "node": _check_str, "nodes": _check_list(_check_str), "stage": _check_str,
}
REFERENCE_KINDS = ("node", "nodes")
_MISSING = object()


class Params(dict):
    """A block's params by name, read through a typed view of the block (``p.out_features``)
    or through a declaration (``p.typed(OUT_FEATURES)``, typed as the param's value).

    A block declares its view as a subclass with one annotation per param, and its build
    (and shape rule, meta, recipe) takes ``p`` as that view::

        class LinearParams(Params):
            out_features: int
            bias: bool
            in_features: int | None

        def _linear(p: LinearParams, x: dict[str, torch.Tensor]) -> nn.Module: ...

    The view only types the reads: at run time `p` is this dict, whose attribute reads look
    the param up (a param wins over a dict method of the same name: ``p.update`` is the
    `update` param when the block has one). To a type checker a bare `Params` has no
    attributes beyond the dict's, so an untyped read fails `mypy`; `tests/test_typed_params.py`
    holds every view to its block's declared params (names and types).
    """

    def typed(self, param: Param[T]) -> T:
        """The value of `param`, typed as its declaration says (never None: a nullable
        param is read with `maybe`)."""
        value = dict.__getitem__(self, param.name)
        if value is None:
            raise ParamError(f"'{param.name}' is empty here; read it with Params.maybe")
        return value

    def maybe(self, param: Param[T]) -> T | None:
        """The value of a nullable `param` (None: empty), typed as its declaration says."""
        return dict.__getitem__(self, param.name)

    if not TYPE_CHECKING:  # typed through a block's view, never as Any
        # Each value is mirrored in the instance's __dict__, so ``p.out_features`` is a
        # plain attribute read in C (an instance attribute wins over a dict method of the
        # same name), where a Python __getattribute__ cost a call on every read of every
        # node that validation infers and compile builds. Every way to change the dict
        # keeps the mirror (a view never holds itself as __dict__: that would be a cycle
        # for the collector on each of the thousands of views a validation makes).
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.__dict__.update(self)

        def __setitem__(self, name: str, value: Any) -> None:
            dict.__setitem__(self, name, value)
            self.__dict__[name] = value

        def __delitem__(self, name: str) -> None:
            dict.__delitem__(self, name)
            del self.__dict__[name]

        def __ior__(self, other: Any) -> Params:
            dict.update(self, other)
            self.__dict__.update(self)
            return self

        def update(self, *args: Any, **kwargs: Any) -> None:
            dict.update(self, *args, **kwargs)
            self.__dict__.update(self)

        def setdefault(self, name: str, default: Any = None) -> Any:
            value = dict.setdefault(self, name, default)
            self.__dict__[name] = value
            return value

        def pop(self, name: str, *default: Any) -> Any:
            self.__dict__.pop(name, None)
            return dict.pop(self, name, *default)

        def popitem(self) -> tuple[str, Any]:
            name, value = dict.popitem(self)
            del self.__dict__[name]
            return name, value

        def clear(self) -> None:
            dict.clear(self)
            self.__dict__.clear()

        def __reduce__(self) -> tuple[Any, ...]:
            # copy and pickle rebuild through __init__, which fills the mirror
            return type(self), (dict(self),)


@dataclass(frozen=True)
class Search:
    """How the editor's block search finds a block besides its name
    (`nodegraph.gui.panels.ranking`).

    `words`: what people type for it ("xent", "bn", "fc"); a word several blocks share is
    written ``(word, n)`` on its n-th meaning (0 is the first, a bare word), so "nll" offers
    CrossEntropy before GaussianNLL. `popularity`: a small lift among equals for the blocks
    most networks use. `follows`: the families that usually read its output, best first,
    where they differ from its family's.
    """

    words: tuple[str | tuple[str, int], ...] = ()
    popularity: float = 0.0
    follows: tuple[str, ...] = ()

    def rank(self, word: str) -> int | None:
        """Which meaning of `word` this block is (0: the first), None when it is not one."""
        for w in self.words:
            text, n = (w, 0) if isinstance(w, str) else w
            if text == word:
                return n
        return None


NO_SEARCH = Search()


@dataclass(frozen=True)
class BlockSpec:
    """The one declaration of a block type."""

    id: str
    kind: str
    doc: str
    build: Callable[..., Any]
    inputs: tuple[Port, ...] = ()
    outputs: tuple[Port, ...] = ()
    params: tuple[Param, ...] = ()
    keywords: tuple[str, ...] = ()
    replaces: tuple[str, ...] = ()  # old ids that files may still use
    closure: bool = False  # optimizers only: step() needs a closure that re-evaluates the loss
    # the node or nodes param naming what the block acts on: an op's or metric's `bind`
    # gets those nodes' modules; a procedure's context gets the node (`ctx.bound`)
    binds: str = ""
    # ops only: how `nodegraph export --to python` writes the block when the constructor call
    # it recorded cannot be written (a large tensor computed from the params): export(p, x)
    # -> (function, kwargs), a plain function and the arguments that build the same module
    export: Callable[..., tuple[Callable[..., Any], dict[str, Any]]] | None = None
    # blocks whose params name Python to call (opaque.*): code(params) -> [(param,
    # "module:qualname", allowlist kind)], checked against `nodegraph.model.allowlist` before any
    # node of the graph is built
    code: Callable[[dict], list[tuple[str, Any, str]]] | None = None
    # data only: meta(p) -> nodegraph.kinds.datameta.DataMeta (shapes, split sizes, batch size
    # from the params alone) or None when only the data can tell; validation then builds
    # no dataset (compile does)
    meta: Callable[[Any], Any] | None = None
    # ops only: shape(p, x) -> nodegraph.kinds.shapes.Inferred (output shapes and dtypes,
    # parameter count and bytes from the params and the inputs' shapes and dtypes, in plain
    # Python) or None where only building the module can tell; validation then runs no
    # meta kernel for the node
    shape: Callable[[Any, dict[str, Any]], Any] | None = None
    category: str = field(default="")
    torch: TorchEquivalent | None = None  # the PyTorch code it computes (see below)
    # data only: recipe(p) -> the numpy lines that make the block's full arrays `x` and `y`
    # (an sklearn loader, a seeded generator), for `nodegraph export --to python`; the
    # exporter keeps them only when they reproduce the dataset exactly
    recipe: Callable[[Any], list[str]] | None = None
    search: Search = field(default_factory=lambda: NO_SEARCH)  # the editor's search hints
    # the constructor of `nodegraph.kinds` that made this declaration ("op", "data", ...,
    # "group"); empty for a bare `block()`, which only engine tests use
    declared: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not BLOCK_ID.match(self.id):
            raise ValueError(f"block id {self.id!r} must look like 'family.Name'")
        if self.kind not in KINDS:
            raise ValueError(f"block {self.id}: kind must be one of {KINDS}, not {self.kind!r}")
        for group in (self.inputs, self.outputs, self.params):
            names = [x.name for x in group]
            if len(set(names)) != len(names):
                raise ValueError(f"block {self.id}: duplicate port or param names {names}")
            bad = [n for n in names if not NAME.match(n)]
            if bad:
                raise ValueError(f"block {self.id}: names must be lower_snake: {bad}")
        args = BUILD_ARGS.get(self.kind)
        if args is not None and not _takes(self.build, args):
            raise ValueError(f"block {self.id}: the build of a {self.kind} block takes {args} "
                             "positional argument(s) (see nodegraph.kinds)")
        if self.binds and getattr(self.param(self.binds), "kind", None) not in REFERENCE_KINDS:
            raise ValueError(f"block {self.id}: binds={self.binds!r} must name one of its "
                             "params of kind node or nodes")
        if self.shape is not None and self.kind != "op":
            raise ValueError(f"block {self.id}: only op blocks declare a shape rule")
        if self.recipe is not None and self.kind != "data":
            raise ValueError(f"block {self.id}: only data blocks declare an export recipe")
        if not self.category:
            object.__setattr__(self, "category", self.id.split(".", 1)[0])

    def input(self, name: str) -> Port | None:
        return self._by_name[0].get(name)

    def output(self, name: str) -> Port | None:
        return self._by_name[1].get(name)

    def param(self, name: str) -> Param | None:
        return self._by_name[2].get(name)

    @cached_property
    def naming_params(self) -> tuple[Param, ...]:
        """The params whose values name nodes or stages (kinds node, nodes and stage), in
        declaration order: what rename rewrites and validation looks up."""
        return tuple(p for p in self.params if p.kind in (*REFERENCE_KINDS, "stage"))

    @cached_property
    def follows_graph_dtype(self) -> bool:
        """The block's `dtype` param defaults to the graph's dtype (see
        `nodegraph.kinds.dtypes.follows_graph`); asked of every node by every validation."""
        param = self.param("dtype")
        return param is not None and param.default == "default"

    @cached_property
    def names_nodes(self) -> bool:
        """Some param of the block names other nodes (renaming a node may rewrite it)."""
        return any(p.names_nodes for p in self.params)

    @cached_property
    def _by_name(self) -> tuple[dict[str, Port], dict[str, Port], dict[str, Param]]:
        """Inputs, outputs and params by name (unique, checked above): the look-ups that
        every edit and validation of every node make, in one step each."""
        return ({p.name: p for p in self.inputs}, {p.name: p for p in self.outputs},
                {p.name: p for p in self.params})

    @property
    def summary(self) -> str:
        """The first sentence of the doc, for palettes and listings."""
        return self.doc.strip().split("\n", 1)[0]

    def resolve_params(self, given: dict[str, Any]) -> tuple[Params, dict[str, str]]:
        """Defaults filled in and values checked; problems by param name (unknown ones too)."""
        values: dict[str, Any] = {}  # a plain dict while filling, one Params at the end
        problems: dict[str, str] = {}
        for param in self.params:
            if param.name in given:
                try:
                    values[param.name] = param.check(given[param.name])
                except ParamError as e:
                    problems[param.name] = str(e)
            elif param.required:
                problems[param.name] = f"'{param.name}' is required ({param.describe()})"
            else:
                values[param.name] = param.default
        for name in given:
            if self.param(name) is None:
                known = ", ".join(p.name for p in self.params) or "none"
                problems[name] = f"{self.id} has no param '{name}' (its params: {known})"
        return Params(values), problems

    def to_dict(self) -> dict:
        def port(p: Port) -> dict:
            d: dict[str, Any] = {"name": p.name, "type": p.type.name, "doc": p.doc}
            if p.optional:
                d["optional"] = True
            if p.views:
                d["views"] = list(p.views)
            return d

        return {"id": self.id, "kind": self.kind, "category": self.category, "doc": self.doc,
                "inputs": [port(p) for p in self.inputs],
                "outputs": [port(p) for p in self.outputs],
                "params": [p.to_dict() for p in self.params],
                "keywords": list(self.keywords)}


def block(id: str, kind: str, doc: str, build: Callable[..., Any], *,
          inputs: Sequence[Port | str] = (), outputs: Sequence[Port | str] = (),
          params: Sequence[Param] = (), **extra: Any) -> BlockSpec:
    """Declare a block; a bare string port is a tensor port of that name."""
    def ports(items: Sequence[Port | str]) -> tuple[Port, ...]:
        return tuple(Port(p) if isinstance(p, str) else p for p in items)

    return BlockSpec(id=id, kind=kind, doc=doc, build=build, inputs=ports(inputs),
                     outputs=ports(outputs), params=tuple(params), **extra)


def _takes(fn: Callable[..., Any], n: int) -> bool:
    """Whether `fn` can be called with `n` positional arguments (True when Python cannot
    tell, as for some builtins)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(*range(n))
    except TypeError:
        return False
    return True


# Short constructors so a declaration reads like the torch signature it mirrors.
def int_param(name: str, default: Any = REQUIRED, doc: str = "", **kw: Any) -> Param[int]:
    return Param(name, "int", default, doc, **kw)


def float_param(name: str, default: Any = REQUIRED, doc: str = "", **kw: Any) -> Param[float]:
    return Param(name, "float", default, doc, **kw)


def bool_param(name: str, default: Any = REQUIRED, doc: str = "", **kw: Any) -> Param[bool]:
    return Param(name, "bool", default, doc, **kw)


def str_param(name: str, default: Any = REQUIRED, doc: str = "", **kw: Any) -> Param[str]:
    return Param(name, "str", default, doc, **kw)


def choice_param(name: str, choices: Sequence, default: Any = REQUIRED, doc: str = "",
                 **kw: Any) -> Param:
    return Param(name, "choice", default, doc, choices=tuple(choices), **kw)


def node_param(name: str, default: Any = REQUIRED, doc: str = "", of: Sequence[str] = (),
               **kw: Any) -> Param:
    """A node id (empty text: none); `of` limits the block kinds it may name."""
    return Param(name, "node", default, doc, of=tuple(of), **kw)


def nodes_param(name: str, default: Any = REQUIRED, doc: str = "", of: Sequence[str] = (),
                **kw: Any) -> Param:
    """A list of node ids; `of` limits the block kinds they may name."""
    return Param(name, "nodes", default, doc, of=tuple(of), **kw)


def stage_param(name: str, default: Any = REQUIRED, doc: str = "", **kw: Any) -> Param:
    """The name of one of the graph's training stages (empty text: none)."""
    return Param(name, "stage", default, doc, **kw)


LOSS_OUT = Port("loss", LOSS, "the scalar loss")
LOSS_IN = Port("loss", LOSS, "the loss this optimizer minimises")
SCHEDULE_OUT = Port("schedule", SCHEDULE, "attach to an optimizer's schedule input")
SCHEDULE_IN = Port("schedule", SCHEDULE, "an optional learning-rate schedule", optional=True)
TRANSFORM_OUT = Port("transform", TRANSFORM, "attach to the next transform or a data block's "
                     "augment input")
TRANSFORM_IN = Port("input", TRANSFORM, "the transforms that run before this one",
                    optional=True)
AUGMENT_IN = Port("augment", TRANSFORM, "per-sample transforms (augmentation blocks, "
                  "chained): random ones on the training split, their deterministic part on "
                  "val/test", optional=True)


# -- torch equivalents: the PyTorch code a block computes, read by import and export --------


@dataclass(frozen=True)
class TorchEquivalent:
    """The PyTorch modules and functions a block computes exactly, so `nodegraph import`
    turns them into the block and no table outside `nodes/` has to know.

    `params(module)` gives the block's params from an instance of one of `modules` (None:
    this instance does not fit the block); `call(args, kwargs)` gives them from the
    constant arguments of a call of one of `functions` (torch functions, or Tensor method
    names as strings) whose tensor arguments come first and feed the block's inputs in
    port order (None: this call does not fit).

    A module is called with its one tensor and nothing else unless `module_call(n, kwargs)`
    says that a call passing that tensor `n` times (``mha(x, x, x)``) with these constant
    keyword arguments computes the block too. A module returning a tuple (nn.LSTM,
    nn.MultiheadAttention) maps only where forward reads its first element alone, the
    block's first output.
    """

    modules: tuple[type, ...] = ()
    params: Callable[[Any], dict[str, Any] | None] | None = None
    functions: tuple[Any, ...] = ()
    call: Callable[[list, dict], dict[str, Any] | None] | None = None
    module_call: Callable[[int, dict], bool] | None = None


def torch_modules(registry: Registry) -> dict[type, BlockSpec]:
    """Each module class some block of `registry` declares as its torch equivalent."""
    return {cls: spec for spec in registry if spec.torch for cls in spec.torch.modules}


def torch_functions(registry: Registry) -> dict[Any, list[BlockSpec]]:
    """Each function (or Tensor method name) to the blocks that declare it, in id order."""
    out: dict[Any, list[BlockSpec]] = {}
    for spec in registry:
        for fn in spec.torch.functions if spec.torch else ():
            out.setdefault(fn, []).append(spec)
    return out


class UnknownBlockError(NodegraphError):
    """A block id the registry does not know."""


class Registry:
    """The block types a graph may use, by id."""

    def __init__(self, specs: Iterable[BlockSpec] = ()):
        self._specs: dict[str, BlockSpec] = {}
        self._aliases: dict[str, str] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: BlockSpec) -> None:
        if spec.id in self._specs:
            raise ValueError(f"block {spec.id} is registered twice")
        self._specs[spec.id] = spec
        for old in spec.replaces:
            self._aliases[old] = spec.id

    def canonical(self, block_id: str) -> str:
        """The current id for `block_id`, following renames."""
        return self._aliases.get(block_id, block_id)

    def __contains__(self, block_id: str) -> bool:
        return self.canonical(block_id) in self._specs

    def get(self, block_id: str) -> BlockSpec:
        spec = self._specs.get(self.canonical(block_id))
        if spec is None:
            close = [s for s in self._specs if s.split(".")[-1].lower()
                     == block_id.split(".")[-1].lower()]
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UnknownBlockError(f"unknown block type '{block_id}'{hint}")
        return spec

    def __iter__(self) -> Iterator[BlockSpec]:
        return iter(sorted(self._specs.values(), key=lambda s: s.id))

    def __len__(self) -> int:
        return len(self._specs)

    def categories(self) -> dict[str, list[BlockSpec]]:
        out: dict[str, list[BlockSpec]] = {}
        for spec in self:
            out.setdefault(spec.category, []).append(spec)
        return out


ENTRY_POINT_GROUP = "nodegraph.blocks"


def load_default_registry() -> Registry:
    """Every block of every installed ``nodegraph.blocks`` entry point, ours included.

    An entry point names a callable returning an iterable of BlockSpec; the built-in library
    is the entry point `builtin = "nodes:all_blocks"` of this project's own metadata. This
    module never imports a block library itself, so the model depends on no blocks.
    """
    registry = Registry()
    seen: set[str] = set()
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.value):
        if ep.value in seen:  # the same distribution found twice on the path
            continue
        seen.add(ep.value)
        for spec in ep.load()():
            registry.register(spec)
    if not seen:
        raise NodegraphError(
            "no block library is installed: nodegraph finds its blocks through the "
            f"'{ENTRY_POINT_GROUP}' entry point; install the package (`pip install -e .` "
            "in a source checkout)")
    return registry


_default: Registry | None = None


def default_registry_loaded() -> bool:
    """Whether `default_registry()` would answer at once (its block library is imported)."""
    return _default is not None


def default_registry() -> Registry:
    """The registry used when none is passed; built once on first use."""
    global _default
    if _default is None:
        _default = load_default_registry()
    return _default
