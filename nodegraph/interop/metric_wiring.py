"""Metric blocks wired for the user: `metrics=["auroc", "f1"]`, as Keras takes them.

The model's prediction and the target are found as a reader of the graph finds them: the
inputs of the loss an optimizer minimises (followed upstream through a sum of losses to the
first loss with an `input` and a `target`). Each named metric becomes a block wired to those
two outputs, with its scores read as the loss reads them (probabilities for losses.BCE,
logits otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import get_close_matches
from typing import Any

from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph

# a name people type -> the metric block
METRICS: dict[str, str] = {
    "accuracy": "metrics.Accuracy", "acc": "metrics.Accuracy",
    "auroc": "metrics.AUROC", "auc": "metrics.AUROC", "roc_auc": "metrics.AUROC",
    "average_precision": "metrics.AveragePrecision", "ap": "metrics.AveragePrecision",
    "f1": "metrics.F1", "precision": "metrics.Precision", "recall": "metrics.Recall",
    "top_k_accuracy": "metrics.TopKAccuracy", "top5": "metrics.TopKAccuracy",
    "matthews": "metrics.Matthews", "mcc": "metrics.Matthews",
    "cohen_kappa": "metrics.CohenKappa", "kappa": "metrics.CohenKappa",
    "mae": "metrics.MAE", "mape": "metrics.MAPE", "mse": "metrics.MSE", "r2": "metrics.R2",
    "ece": "metrics.ECE", "confusion_matrix": "metrics.ConfusionMatrix",
}
PROBABILITIES = {"losses.BCE"}  # losses whose input is a probability, not a logit


def wire_metrics(graph: Graph, names: Sequence[str]) -> Graph:
    """A copy of `graph` with a metric block per name in `names`, wired to the prediction
    and the target of the graph's loss; the node is named as the metric ("auroc", or
    "auroc_2" when that id is taken), so its value is reported as `val.auroc`."""
    if isinstance(names, str):
        names = [names]
    blocks = [_block(name) for name in names]
    loss = _loss_node(graph)
    prediction, target = graph.source_of(loss, "input"), graph.source_of(loss, "target")
    assert prediction is not None and target is not None  # _loss_node found both
    probabilities = graph.node(loss).type in PROBABILITIES
    g = graph.copy()
    for name, block in zip(names, blocks, strict=True):
        node = _free_id(g, name.lower())
        g.add(block, node, **_params(g, block, probabilities))
        g.connect(prediction.source, (node, "input"))
        g.connect(target.source, (node, "target"))
    return g


def _block(name: str) -> str:
    key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
    if key in METRICS:
        return METRICS[key]
    close = get_close_matches(key, METRICS, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise NodegraphError(f"unknown metric {name!r}{hint}; known: "
                         f"{', '.join(sorted(METRICS))}")


def _loss_node(graph: Graph) -> str:
    """The loss whose `input` and `target` the metrics read: upstream of the first
    optimizer's `loss` input."""
    reg = graph.registry
    optimizers = [n.id for n in graph if n.type in reg and reg.get(n.type).kind == "optimizer"]
    if not optimizers:
        raise NodegraphError("metrics need the graph's loss, and this graph has no optimizer "
                             "(wire metric blocks to the prediction and target instead)")
    seen: set[str] = set()
    todo = [e.src for o in optimizers for e in graph.edges_into(o) if e.dst_port == "loss"]
    while todo:
        node = todo.pop(0)
        if node in seen:
            continue
        seen.add(node)
        ports = {e.dst_port: e for e in graph.edges_into(node)}
        if "input" in ports and "target" in ports:
            return node
        todo.extend(e.src for e in ports.values())
    raise NodegraphError(f"no loss with an 'input' and a 'target' wired feeds optimizer "
                         f"'{optimizers[0]}': wire the loss first, or the metric blocks by hand")


def _free_id(graph: Graph, name: str) -> str:
    if name not in graph.nodes:
        return name
    i = 2
    while f"{name}_{i}" in graph.nodes:
        i += 1
    return f"{name}_{i}"


def _params(graph: Graph, block: str, probabilities: bool) -> dict[str, Any]:
    """`scores` (and Accuracy's threshold) as the loss reads its input."""
    declared = {p.name for p in graph.registry.get(block).params}
    out: dict[str, Any] = {}
    if "scores" in declared:
        out["scores"] = "probabilities" if probabilities else "logits"
    if block in ("metrics.Accuracy", "metrics.ConfusionMatrix") and probabilities:
        out["threshold"] = 0.5
    return out


__all__ = ["METRICS", "wire_metrics"]
