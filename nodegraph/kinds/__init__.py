"""The build signature of each block kind, as Protocols a type checker can hold a block to.

`nodegraph.model.spec` documents what `build` receives and returns per kind; here it is typed.
Declare a block with the constructor of its kind from `nodegraph.kinds.declare` (`op`,
`estimator`, `data`, `metric`, `optimizer`, `schedule`, `procedure`, `transform`; `family`
for blocks sharing ports; a module of their own, as `metric` and `estimator` also name
modules here) and mypy checks the build function against the Protocol; the constructor
stamps the declaration (`BlockSpec.declared`), and every block of the library is made this
way, once, with all that belongs to it (torch equivalence, the `dtype` param, export
recipe, search hints).
The Protocols are generic in the params view the build takes (`P`, a `Params` subclass
annotating each param: docs/writing-blocks.md), so the build's reads of its params are
checked too.
`BlockSpec` also checks at declaration that `build` takes the kind's number of positional
arguments, so a block written without a type checker fails when it is declared,
not when a graph first uses it.

Modules beside the Protocols, what blocks of one kind share:
- `dataset`: what a data block builds (whole tensors, split once, batched)
- `metric`: values accumulated over a split; `optim`: optimizer and schedule params
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from nodegraph.model.spec import Params

if TYPE_CHECKING:  # annotations only: the model layer does not import the runtime
    import torch
    from torch import nn

    from nodegraph.kinds.augment import Step
    from nodegraph.kinds.dataset import Dataset
    from nodegraph.kinds.estimator import Estimator
    from nodegraph.kinds.metric import Metric
    from nodegraph.kinds.procedure_context import Procedure

NamedParams = Sequence[tuple[str, "torch.nn.Parameter"]]
# the block's typed view of its params (a `Params` subclass with one annotation per param):
# a build typed `build(p: LinearParams, x)` is checked against the view, and the view
# against the block's declared params by tests/test_typed_params.py
P = TypeVar("P", bound=Params, contravariant=True)


class OpBuild(Protocol[P]):
    """``build(p, x)``: the params and a meta tensor per connected input -> the module."""

    def __call__(self, p: P, x: dict[str, torch.Tensor], /) -> nn.Module: ...


class DataBuild(Protocol[P]):
    """``build(p)``: the whole dataset with its splits."""

    def __call__(self, p: P, /) -> Dataset: ...


class MetricBuild(Protocol[P]):
    """``build(p, x)``: a metric accumulating over an epoch."""

    def __call__(self, p: P, x: dict[str, torch.Tensor], /) -> Metric: ...


class OptimizerBuild(Protocol[P]):
    """``build(p, named)``: an optimizer over (``node.param``, Parameter) pairs."""

    def __call__(self, p: P, named: NamedParams, /) -> torch.optim.Optimizer: ...


class ScheduleBuild(Protocol[P]):
    """``build(p, optimizer)``: a learning-rate scheduler of that optimizer."""

    def __call__(self, p: P, optimizer: torch.optim.Optimizer, /
                 ) -> torch.optim.lr_scheduler.LRScheduler: ...


class ProcedureBuild(Protocol[P]):
    """``build(p)``: a loop around a trained model."""

    def __call__(self, p: P, /) -> Procedure: ...


class EstimatorBuild(Protocol[P]):
    """``build(p, x)``: an op whose module learns by a fit on the train split."""

    def __call__(self, p: P, x: dict[str, torch.Tensor], /) -> Estimator: ...


class TransformBuild(Protocol[P]):
    """``build(p)``: one per-sample transform of a data block (`nodegraph.kinds.augment`)."""

    def __call__(self, p: P, /) -> Step: ...
