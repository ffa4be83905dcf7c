"""The kind constructors: every block of the library is declared by one call of these.

`op("layers.Linear", doc, build, inputs=..., params=..., torch=..., shape=...)` and its
siblings make a `BlockSpec` of their kind, with the build function typed by the kind's
Protocol (`nodegraph.kinds`), and stamp it with their name (`BlockSpec.declared`) so a test
can hold every registered block to having been declared this way. All that belongs to a
block is a field of that one call: torch equivalence (`torch=`), the `dtype` param
(`DTYPE_PARAM` in `params`), export recipe (`recipe=`, data blocks), search hints
(`search=`), shape rule (`shape=`), data meta (`meta=`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from nodegraph.kinds import (
    DataBuild,
    EstimatorBuild,
    MetricBuild,
    OpBuild,
    OptimizerBuild,
    ProcedureBuild,
    ScheduleBuild,
    TransformBuild,
)
from nodegraph.model.spec import TRANSFORM_IN, TRANSFORM_OUT, BlockSpec, Param, Params, block

# the params view a build takes (`nodegraph.kinds.P`): inferred from the build function
V = TypeVar("V", bound=Params)


def _declare(constructor: str, kind: str, id: str, doc: str, build: Callable[..., Any],
             kw: dict[str, Any]) -> BlockSpec:
    """The declaration, stamped with the constructor that made it (a test holds every
    registered block to having one)."""
    return block(id, kind, doc, build, declared=constructor, **kw)


def op(id: str, doc: str, build: OpBuild[V], **kw: Any) -> BlockSpec:
    """An op: a module computing its outputs from its inputs (losses are ops too)."""
    return _declare("op", "op", id, doc, build, kw)


def estimator(id: str, doc: str, build: EstimatorBuild[V], **kw: Any) -> BlockSpec:
    """An op whose module is an `Estimator`, fitted on the train split when a run starts."""
    return _declare("estimator", "op", id, doc, build, kw)


def data(id: str, doc: str, build: DataBuild[V], **kw: Any) -> BlockSpec:
    """A dataset with its splits; `meta=` for validation, `recipe=` for the Python export."""
    return _declare("data", "data", id, doc, build, kw)


def metric(id: str, doc: str, build: MetricBuild[V], **kw: Any) -> BlockSpec:
    """A value accumulated over a split."""
    return _declare("metric", "metric", id, doc, build, kw)


def optimizer(id: str, doc: str, build: OptimizerBuild[V], **kw: Any) -> BlockSpec:
    """An optimizer over the weights of the graph (or of the nodes it names)."""
    return _declare("optimizer", "optimizer", id, doc, build, kw)


def schedule(id: str, doc: str, build: ScheduleBuild[V], **kw: Any) -> BlockSpec:
    """A learning-rate schedule of an optimizer."""
    return _declare("schedule", "schedule", id, doc, build, kw)


def procedure(id: str, doc: str, build: ProcedureBuild[V], **kw: Any) -> BlockSpec:
    """A loop around a trained model, run after training."""
    return _declare("procedure", "procedure", id, doc, build, kw)


def transform(id: str, doc: str, build: TransformBuild[V], **kw: Any) -> BlockSpec:
    """A per-sample transform of a data block: `TRANSFORM_IN` and `TRANSFORM_OUT` ports
    unless given."""
    kw.setdefault("inputs", [TRANSFORM_IN])
    kw.setdefault("outputs", [TRANSFORM_OUT])
    return _declare("transform", "transform", id, doc, build, kw)


# the constructors by name, and the block kind each declares; "group" is the declaration
# a group file makes (`nodegraph.model.groupdefs.group_spec`)
CONSTRUCTORS: dict[str, Callable[..., BlockSpec]] = {
    "op": op, "estimator": estimator, "data": data, "metric": metric,
    "optimizer": optimizer, "schedule": schedule, "procedure": procedure,
    "transform": transform}
KIND_OF = {**{name: name for name in CONSTRUCTORS}, "estimator": "op", "group": "group"}


def family(prefix: str, constructor: str, *,
           wrap: Callable[[Any], Callable[..., Any]] | None = None,
           shared_params: Sequence[Param] = (), shared_keywords: Sequence[str] = (),
           **defaults: Any) -> Callable[..., BlockSpec]:
    """The declarer of a family of blocks: ids ``prefix.Name``, each made by the kind
    constructor named `constructor` ("op", "metric", ...), sharing ports and whatever else
    `defaults` holds, `shared_params` after each block's own and `shared_keywords` before
    its own. `wrap(build)` turns what a declaration passes as its build into the block's
    build (an activation passes its function)."""
    make = CONSTRUCTORS[constructor]

    def declare(name: str, doc: str, build: Any, params: Sequence[Param] = (),
                keywords: Sequence[str] = (), **extra: Any) -> BlockSpec:
        return make(f"{prefix}.{name}", doc, wrap(build) if wrap else build,
                    params=[*params, *shared_params],
                    keywords=(*shared_keywords, *keywords), **{**defaults, **extra})

    return declare
