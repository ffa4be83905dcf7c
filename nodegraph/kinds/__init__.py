"""The build signature of each block kind, as Protocols a type checker can hold a block to.

`nodegraph.model.spec` documents what `build` receives and returns per kind; here it is typed.
Declare a block with the constructor of its kind (`op`, `data`, `metric`, `optimizer`,
`schedule`, `procedure`, `transform`) and pyright or mypy check the build function against the
Protocol; `BlockSpec` also checks at declaration that `build` takes the kind's number of
positional arguments, so a block written without a type checker fails when it is declared,
not when a graph first uses it.

Modules beside the Protocols, what blocks of one kind share:
- `dataset`: what a data block builds (whole tensors, split once, batched); `streamed` and
  `loading`: the kind read per sample by DataLoader workers; `augment`: transform chains
- `metric`: values accumulated over a split; `optim`: optimizer and schedule params
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from nodegraph.model.spec import BlockSpec, Params, block

if TYPE_CHECKING:  # annotations only: the model layer does not import the runtime
    import torch
    from torch import nn

    from nodegraph.kinds.augment import Step
    from nodegraph.kinds.dataset import Dataset
    from nodegraph.kinds.metric import Metric
    from nodegraph.kinds.procedure_context import Procedure

NamedParams = Sequence[tuple[str, "torch.nn.Parameter"]]


class OpBuild(Protocol):
    """``build(p, x)``: the params and a meta tensor per connected input -> the module."""

    def __call__(self, p: Params, x: dict[str, torch.Tensor], /) -> nn.Module: ...


class DataBuild(Protocol):
    """``build(p)``: the whole dataset with its splits."""

    def __call__(self, p: Params, /) -> Dataset: ...


class MetricBuild(Protocol):
    """``build(p, x)``: a metric accumulating over an epoch."""

    def __call__(self, p: Params, x: dict[str, torch.Tensor], /) -> Metric: ...


class OptimizerBuild(Protocol):
    """``build(p, named)``: an optimizer over (``node.param``, Parameter) pairs."""

    def __call__(self, p: Params, named: NamedParams, /) -> torch.optim.Optimizer: ...


class ScheduleBuild(Protocol):
    """``build(p, optimizer)``: a learning-rate scheduler of that optimizer."""

    def __call__(self, p: Params, optimizer: torch.optim.Optimizer, /
                 ) -> torch.optim.lr_scheduler.LRScheduler: ...


class ProcedureBuild(Protocol):
    """``build(p)``: a loop around a trained model."""

    def __call__(self, p: Params, /) -> Procedure: ...


def op(id: str, doc: str, build: OpBuild, **kw: Any) -> BlockSpec:
    return block(id, "op", doc, build, **kw)


def data(id: str, doc: str, build: DataBuild, **kw: Any) -> BlockSpec:
    return block(id, "data", doc, build, **kw)


def metric(id: str, doc: str, build: MetricBuild, **kw: Any) -> BlockSpec:
    return block(id, "metric", doc, build, **kw)


def optimizer(id: str, doc: str, build: OptimizerBuild, **kw: Any) -> BlockSpec:
    return block(id, "optimizer", doc, build, **kw)


def schedule(id: str, doc: str, build: ScheduleBuild, **kw: Any) -> BlockSpec:
    return block(id, "schedule", doc, build, **kw)


def procedure(id: str, doc: str, build: ProcedureBuild, **kw: Any) -> BlockSpec:
    return block(id, "procedure", doc, build, **kw)


class TransformBuild(Protocol):
    """``build(p)``: one per-sample transform of a data block (`nodegraph.kinds.augment`)."""

    def __call__(self, p: Params, /) -> Step: ...


def transform(id: str, doc: str, build: TransformBuild, **kw: Any) -> BlockSpec:
    """A transform block: `TRANSFORM_IN` and `TRANSFORM_OUT` ports unless given."""
    from nodegraph.model.spec import TRANSFORM_IN, TRANSFORM_OUT

    kw.setdefault("inputs", [TRANSFORM_IN])
    kw.setdefault("outputs", [TRANSFORM_OUT])
    return block(id, "transform", doc, build, **kw)
