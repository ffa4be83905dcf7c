"""`fit(class_weight=...)`: class weights as the classification loss's own params.

Keras takes `class_weight={0: 1.0, 1: 5.0}` or scikit-learn's "balanced"
(n_samples / (n_classes * count of the class), over the training targets). Here they
become params of the graph's loss, so the model file says what it was trained with:
losses.CrossEntropy's `weight` (one per class, torch's weighted cross-entropy, whose mean
divides by the targets' total weight), and for losses.BCEWithLogits on 0/1 targets
`scale` = w0 and `pos_weight` = w1 / w0, which is each sample's loss times its class's
weight, exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from nodegraph.check.validate import validate
from nodegraph.interop.arguments import shown
from nodegraph.kinds import given
from nodegraph.kinds.dataset import Dataset, files_relative_to
from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph

WEIGHED = ("losses.CrossEntropy", "losses.BCEWithLogits")


def weigh_classes(graph: Graph, class_weight: Mapping[Any, float] | str,
                  handed: Mapping[str, Dataset]) -> None:
    """Set the class weights on `graph`'s classification losses (the graph is the model's
    own copy); `handed` are the caller's datasets, whose training targets "balanced"
    counts (else the data block's own)."""
    if not (class_weight == "balanced" or isinstance(class_weight, Mapping)):
        raise NodegraphError("fit(class_weight=...) takes {class: weight} or 'balanced' "
                             f"(got {shown(class_weight)})")
    losses = [n for n in graph if n.type in WEIGHED]
    if not losses:
        others = [f"{n.id} ({n.type})" for n in graph if n.type.startswith("losses.")]
        raise NodegraphError("fit(class_weight=...) weighs a classification loss: "
                             f"{' or '.join(WEIGHED)}; the graph's losses: "
                             f"{', '.join(others) or 'none'}")
    with given.given(handed):
        report = validate(graph)
    report.raise_if_errors()
    for node in losses:
        scores = _source(graph, node.id, "input")
        target = _source(graph, node.id, "target")
        width = int(report.outputs[scores].shape[-1])
        y = _training_targets(graph, report, target, handed)
        if node.type == "losses.CrossEntropy":
            weights = _per_class(class_weight, y, width, node.id)
            graph.set_param(node.id, "weight", [float(w) for w in weights])
        else:
            w0, w1 = _per_class(class_weight, y, 2, node.id)
            if w0 <= 0:
                raise NodegraphError(f"class_weight for '{node.id}' (binary): class 0's "
                                     "weight must be > 0")
            graph.set_param(node.id, "scale", float(node.params.get("scale", 1.0)) * w0)
            graph.set_param(node.id, "pos_weight",
                            float(node.params.get("pos_weight") or 1.0) * w1 / w0)


def balanced(y: np.ndarray, classes: int) -> np.ndarray:
    """scikit-learn's 'balanced' weights n / (n_present * count) per class; a class absent
    from `y` gets 1 (no target of it is weighed)."""
    counts = np.bincount(y, minlength=classes).astype(np.float64)
    present = counts > 0
    out = np.ones(classes)
    out[present] = len(y) / (present.sum() * counts[present])
    return out


def _per_class(class_weight: Mapping[Any, float] | str, y: np.ndarray, classes: int,
               node: str) -> list[float]:
    if isinstance(class_weight, str):
        if y.size and (y.min() < 0 or y.max() >= classes):
            raise NodegraphError(f"class_weight='balanced' for '{node}': targets run over "
                                 f"{int(y.min())}..{int(y.max())}, the scores over {classes} "
                                 "classes")
        return list(balanced(y, classes))
    out = [1.0] * classes
    for key, w in class_weight.items():
        if isinstance(key, bool) or not isinstance(key, int | np.integer) or \
                not 0 <= key < classes:
            raise NodegraphError(f"class_weight for '{node}': {key!r} is not a class (the "
                                 f"scores have {classes}: 0 to {classes - 1})")
        if not isinstance(w, int | float) or isinstance(w, bool) or w < 0:
            raise NodegraphError(f"class_weight for '{node}': class {key}'s weight must be "
                                 f"a number >= 0 (got {shown(w)})")
        out[int(key)] = float(w)
    return out


def _source(graph: Graph, node: str, port: str) -> tuple[str, str]:
    edge = next((e for e in graph.edges_into(node) if e.dst_port == port), None)
    if edge is None:
        raise NodegraphError(f"class_weight: '{node}' has nothing wired to its {port}")
    return edge.source


def _training_targets(graph: Graph, report: Any, source: tuple[str, str],
                      handed: Mapping[str, Dataset]) -> np.ndarray:
    """The training split's targets wired into a loss, as integers (the 0/1 of a binary
    target too)."""
    node, port = source
    ds = handed.get(node) or report.datasets.get(node)
    if ds is None and node in report.data:  # described by its meta: read it now
        spec = report.specs[node]
        with files_relative_to(graph.folder):
            ds = spec.build(report.params[node])
    if ds is None:
        raise NodegraphError(f"class_weight: the loss's target comes from '{node}', not a "
                             "data block; give the weights as {class: weight}")
    y = ds.tensors("train")[port] if not getattr(ds, "streamed", False) else None
    if y is None:
        raise NodegraphError(f"class_weight='balanced': '{node}' streams its data; give the "
                             "weights as {class: weight}")
    y = y.detach().cpu()
    if y.is_floating_point():
        y = torch.round(y)
    return y.reshape(-1).to(torch.int64).numpy()
