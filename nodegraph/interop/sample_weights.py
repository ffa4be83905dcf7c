"""`fit(sample_weight=...)`: one weight per sample, multiplying that sample's loss.

The rule is Keras' (its losses' default reduction, 'sum_over_batch_size'): a batch's loss
is the sum of each sample's loss times its weight, divided by the number of samples in the
batch, ``mean(loss_i * w_i)`` — not the weighted mean ``sum(loss_i * w_i) / sum(w_i)``.
Chosen for two reasons: a script ported from Keras gets Keras' numbers, and a sample's pull
on a step does not depend on the weights of the others in its batch (the loss is linear in
the weights: a weight of 2 counts a sample twice, 0 leaves it out, and weights of 1 are
the unweighted loss), where dividing by each batch's own total weight would rescale every
step by whichever samples happened to share it. A block whose reduction is a sum weighs
the same way and sums; `batchmean` (the divergences) sums and divides by the batch size.

How they travel: the weights are one more port (`PORT`) of the data block's dataset, so
the block's own split (`val_fraction`: the validation rows take their weights along),
shuffling and batching carry each weight with its sample; `validation_data=(x, y, w)`
gives the validation rows theirs (without, they weigh 1, and so do training rows when only
the validation data has weights). While `fit` or `evaluate` runs on weighted data
(`weighing`), each loss node the batch reaches that can output one loss per sample (a
`reduction` param with 'none') runs as `Weighed`: its block built again with reduction
'none', the losses times the weights broadcast over all but the batch, reduced as the
block reduces. Losses the optimizers minimise through a `losses.WeightedSum` are weighed
part by part; a penalty on weights (no sample reaches it) is not weighed, as Keras leaves
regularisation losses. The graph, its file and the compiled model outside those calls are
as built: save, export and predict never see a weight.

Metric blocks are not weighed: Keras weighs only its `weighted_metrics`, never `metrics`.
With `class_weight` too, a CrossEntropy's per-sample loss carries its class's weight and
the batch's loss still divides by the batch size (Keras' rule for class and sample weights
together), not by the targets' total class weight (torch's unweighted mean).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import nn

from nodegraph.kinds import dtypes
from nodegraph.kinds.dataset import SPLITS
from nodegraph.model.errors import NodegraphError, NodeRuntimeError
from nodegraph.model.spec import Params
from nodegraph.model.types import LOSS
from nodegraph.runtime.compile import Compiled, Plan, Step

PORT = "sample_weight"  # the dataset port holding the weights (no data block has one)
REDUCTIONS = ("mean", "sum", "batchmean")  # what a weighed loss reduces by, as its block


def checked(value: Any, what: str, n: int) -> np.ndarray:
    """`value` (a numpy array, torch tensor, list, pandas Series) as n float weights, one
    per sample: 1-D, finite, >= 0; else an error naming `what` (the argument)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    elif hasattr(value, "to_numpy") and type(value).__module__.startswith("pandas"):
        value = value.to_numpy()
    try:
        w = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise NodegraphError(f"{what} takes one number per sample ({e})") from None
    if w.dtype.kind not in "biuf":
        raise NodegraphError(f"{what} takes numbers, one per sample (got {w.dtype} values)")
    if w.ndim != 1:
        raise NodegraphError(f"{what} takes a 1-D array, one weight per sample (got shape "
                             f"{tuple(w.shape)}; for one weight per class give class_weight=)")
    if len(w) != n:
        raise NodegraphError(f"{what} has {len(w)} weights for {n} samples: give one per "
                             "sample, in the order of x")
    w = w.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(w))
    if bad.size:
        raise NodegraphError(f"{what}: weights must be finite numbers (sample {bad[0]} has "
                             f"{w[bad[0]]})")
    bad = np.flatnonzero(w < 0)
    if bad.size:
        raise NodegraphError(f"{what}: weights must be >= 0 (sample {bad[0]} has "
                             f"{w[bad[0]]:g})")
    return w.astype(np.float32)


def attach(train: dict[str, dict[str, np.ndarray]],
           val: dict[str, dict[str, np.ndarray]] | None, weights: Any, val_weights: Any,
           function: str = "fit") -> None:
    """Add the checked weights to the weighed block's arrays (as port `PORT`): `weights`
    for `train`, `val_weights` (validation_data's third item) for `val`; a side given
    none weighs its samples 1."""
    node = weighed_node(train, f"{function}(sample_weight=...)")
    n = len(next(iter(train[node].values())))
    train[node][PORT] = np.ones(n, np.float32) if weights is None else \
        checked(weights, f"{function}(sample_weight=...)", n)
    if val is not None and node in val:
        m = len(next(iter(val[node].values())))
        val[node][PORT] = np.ones(m, np.float32) if val_weights is None else \
            checked(val_weights, f"{function}(validation_data=...)'s sample weights (its "
                    "third item)", m)


def weighed_node(train: Mapping[str, Mapping[str, np.ndarray]], what: str) -> str:
    """The data node whose samples the weights are for: the one the arrays gave targets
    to (or the only one given arrays)."""
    nodes = [node for node, arrays in train.items() if "y" in arrays] or list(train)
    if len(nodes) != 1:
        raise NodegraphError(f"{what}: the arrays feed several data blocks "
                             f"({', '.join(nodes)}); sample weights go with one block's "
                             "samples, so give targets to one of them")
    return nodes[0]


def holder(datasets: Mapping[str, Any]) -> str | None:
    """The data node whose dataset holds sample weights, if any does."""
    return next((node for node, ds in datasets.items()
                 if not getattr(ds, "streamed", False) and PORT in ds.ports), None)


Held = dict[str, dict[str, torch.Tensor]]  # data node -> split -> its samples' weights


def taken(datasets: Mapping[str, Any]) -> Held:
    """The sample weights out of the datasets (which then hold only the block's own
    ports, as predict, export and the data views expect), by node and split."""
    node = holder(datasets)
    if node is None:
        return {}
    ds = datasets[node]
    return {node: {s: ds.tensors(s).pop(PORT) for s in SPLITS if ds.has(s)}}


def put_back(datasets: Mapping[str, Any], held: Held) -> None:
    """The weights `taken` left with their samples again (for the next fit, evaluate)."""
    for node, splits in held.items():
        ds = datasets.get(node)
        if ds is None or getattr(ds, "streamed", False):
            continue
        for s, w in splits.items():
            part = ds.tensors(s) if ds.has(s) else None
            if part is not None and len(next(iter(part.values()))) == len(w):
                part[PORT] = w


class Weighed(nn.Module):
    """A loss node run with sample weights: ``reduce(per_sample * w)`` with the block's
    own reduction; without weights in the batch (none handed in), the block as built."""

    def __init__(self, node: str, plain: nn.Module, per_sample: nn.Module, reduction: str):
        super().__init__()
        self.node, self.plain, self.per_sample = node, plain, per_sample
        self.reduction = reduction
        if hasattr(plain, "class_indices"):  # a bad label is still named by its wire
            self.class_indices = plain.class_indices

    def forward(self, *args: Any) -> torch.Tensor:
        *inputs, w = args
        if w is None:
            return self.plain(*inputs)
        loss = self.per_sample(*inputs)
        if loss.ndim == 0 or loss.shape[0] != w.shape[0]:
            raise NodeRuntimeError(self.node, f"sample_weight: its per-sample losses are "
                                   f"shaped {tuple(loss.shape)} for a batch of {w.shape[0]} "
                                   "samples (the first dimension must be the samples)",
                                   "weigh samples only with losses of per-sample inputs")
        weighed = loss * w.reshape(w.shape[0], *([1] * (loss.ndim - 1))).to(loss.dtype)
        if self.reduction == "mean":
            return weighed.mean()
        total = weighed.sum()
        return total / loss.shape[0] if self.reduction == "batchmean" else total


def weighed_losses(c: Compiled, data_node: str) -> dict[str, str]:
    """Loss node -> its reduction, for every loss the batch's samples reach that can give
    one loss per sample. Refuses a loss an optimizer minimises, reached by the samples,
    that cannot."""
    report, graph = c.report, c.exec_graph or c.graph
    reached = _downstream(graph, data_node)
    out: dict[str, str] = {}

    def reduction_of(node: str) -> str | None:
        param = report.specs[node].param("reduction")
        if param is None or "none" not in param.choices:
            return None
        return str(report.params[node].get("reduction"))

    for node in c.loss_keys:
        how = reduction_of(node)
        if node in reached and how in REDUCTIONS:
            out[node] = how

    def need(node: str, optimizer: str) -> None:
        if node not in reached or node in out:
            return  # a penalty on weights: no sample reaches it
        spec = report.specs[node]
        if spec.inputs and all(p.type == LOSS for p in spec.inputs):  # WeightedSum
            for e in graph.edges_into(node):
                need(e.src, optimizer)
            return
        how = reduction_of(node)
        why = (f"its reduction is '{how}'" if how is not None else
               "it has no per-sample ('none') reduction")
        raise NodegraphError(
            f"sample_weight: optimizer '{optimizer}' minimises '{node}' "
            f"({spec.id}), which cannot weigh its samples: {why}. Weigh samples with a loss "
            "that has a reduction param (mean, sum or batchmean), e.g. losses.MSE with "
            "reduction = sum for losses.SSE, wired straight (or through losses.WeightedSum) "
            "into the optimizer")

    for o in c.optimizers:
        need(o.loss_key[0], o.node)
    if not out:
        raise NodegraphError("sample_weight: no loss of the graph reads the "
                             f"samples of '{data_node}' per sample; nothing to weigh")
    return out


def _per_sample(c: Compiled, node: str) -> nn.Module:
    """Loss node `node`'s block built again, with reduction 'none', in its dtype and on
    the device (class weights and every other param as the node has them)."""
    report, graph = c.report, c.exec_graph or c.graph
    spec = report.specs[node]
    params = Params({**report.params[node], "reduction": "none"})
    inputs = {e.dst_port: report.outputs[e.source] for e in graph.edges_into(node)}
    dtype = dtypes.node_dtypes(report, report.settings)[node]
    with dtypes.building(dtype):
        module = spec.build(params, inputs)
    return dtypes.cast_module(module, dtype).to(c.device)


@contextmanager
def weighing(c: Compiled) -> Iterator[None]:
    """Within this block, the loss nodes of `c` weigh the samples of the batch by the
    weights its datasets hold (nothing changes when they hold none)."""
    apply = Weighing()
    apply(c)
    try:
        yield
    finally:
        apply.undo()


class Weighing:
    """Swaps the weighed loss nodes' steps in a compiled graph's plans (`__call__`, a
    `prepare` hook of `nodegraph.train`: the first fit compiles inside it), and back
    (`undo`)."""

    def __init__(self) -> None:
        self.compiled: Compiled | None = None
        self.swapped: dict[str, tuple[Step, Step]] = {}

    def __call__(self, c: Compiled) -> None:
        data_node = holder(c.datasets)
        if data_node is None or self.compiled is not None:
            return
        swapped: dict[str, tuple[Step, Step]] = {}
        for node, how in weighed_losses(c, data_node).items():
            old = c.module._steps[node]
            if isinstance(old[1], Weighed):
                continue
            module: nn.Module = Weighed(node, old[1], _per_sample(c, node), how)
            swapped[node] = (old, (node, module, (*old[2], (data_node, PORT)), old[3]))
        self.compiled, self.swapped = c, swapped
        _swap(c, {node: new for node, (_, new) in swapped.items()})

    def undo(self) -> None:
        if self.compiled is not None:
            _swap(self.compiled, {node: old for node, (old, _) in self.swapped.items()})
        self.compiled, self.swapped = None, {}


def _swap(c: Compiled, steps: Mapping[str, Step]) -> None:
    """Put `steps` (by node) in every plan of `c`: the module's, evaluation's and each
    optimizer's."""
    if not steps:
        return
    m = c.module
    for node, step in steps.items():
        m._steps[node] = step
    m.full_plan = _replaced(m.full_plan, steps)
    c.eval_plan = _replaced(c.eval_plan, steps)
    for o in c.optimizers:
        o.plan = _replaced(o.plan, steps)


def _replaced(plan: tuple[Step, ...], steps: Mapping[str, Step]) -> tuple[Step, ...]:
    new = tuple(steps.get(s[0], s) for s in plan)
    if not isinstance(plan, Plan):
        return new
    out = Plan(new)
    out.drop, out.loss = plan.drop, plan.loss
    return out


def _downstream(graph: Any, start: str) -> set[str]:
    """The nodes `start`'s outputs reach, through any number of wires."""
    seen, todo = set(), [start]
    while todo:
        for e in graph.edges_from(todo.pop()):
            if e.dst not in seen:
                seen.add(e.dst)
                todo.append(e.dst)
    return seen
