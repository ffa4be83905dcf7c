"""What makes an imported graph ready to open and to train: positions and a training head.

`layered_positions` places the nodes in columns by their longest path from an input (a
Qt-free layered layout, so an 800-node import opens readably in the editor); `add_training`
wires a loss on the graph's first output and an optimizer on the loss, so `nodegraph run`
fine-tunes an imported classifier at once on its example data (whose targets are the
module's own predictions until the data block is replaced).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from nodegraph.model.errors import NodegraphError

COLUMN, ROW = 220.0, 110.0  # the editor's spacing between columns and rows of nodes
SCREEN_ASPECT = 1.6  # width / height of the canvas an import should fill

LOSSES = {"cross_entropy": "losses.CrossEntropy", "mse": "losses.MSE", "mae": "losses.MAE",
          "huber": "losses.Huber", "bce_logits": "losses.BCEWithLogits"}
OPTIMIZERS = {"adam": "optimizers.Adam", "adamw": "optimizers.AdamW", "sgd": "optimizers.SGD",
              "momentum": "optimizers.Momentum", "rmsprop": "optimizers.RMSProp"}


def layered_positions(graph) -> dict[str, list[float]]:
    """Node id -> [x, y]: column = longest path from a node without inputs, rows in order
    of appearance within a column, the columns wrapped into bands to fit a screen."""
    try:  # (a group's instance is added after the nodes that read it)
        order = list(graph.topological_order())
    except Exception:  # a cycle: validation names it; lay out in file order
        order = list(graph.nodes)
    depth: dict[str, int] = {}
    sources: dict[str, list[str]] = {n: [] for n in order}
    for edge in graph.edges:
        sources[edge.dst].append(edge.src)
    for node in order:
        depth[node] = 1 + max((depth.get(s, 0) for s in sources[node]), default=-1)
    rows: dict[int, int] = {}
    row_of = {}
    for node in order:
        row_of[node] = rows.get(depth[node], 0)
        rows[depth[node]] = row_of[node] + 1
    # a deep network is cut into bands of columns stacked under each other, so it fills a
    # screen (aspect SCREEN_ASPECT) instead of running as one row
    columns, tall = max(depth.values(), default=0) + 1, max(rows.values(), default=1)
    bands = max(1, min(columns, round(math.sqrt(columns * COLUMN / (SCREEN_ASPECT * tall
                                                                     * ROW)))))
    per = math.ceil(columns / bands)
    band_height = (tall + 1) * ROW
    return {node: [(depth[node] % per) * COLUMN,
                   (depth[node] // per) * band_height + row_of[node] * ROW]
            for node in order}


def add_training(graph, folder: Path, loss: str | None, optimizer: str | None) -> list[str]:
    """Add a loss on the first output (targets from the example data) and an optimizer on
    it; returns the ids added."""
    added: list[str] = []
    info = graph.extra["imported"]
    if optimizer and not loss:
        raise NodegraphError("--optimizer needs --loss: an optimizer minimises a loss")
    if not loss:
        return added
    loss_type = LOSSES.get(loss, loss)
    if loss_type not in graph.registry or graph.registry.get(loss_type).outputs[0].name \
            != "loss":
        raise NodegraphError(f"--loss {loss}: not a loss block; use one of "
                             f"{', '.join(LOSSES)} or a block id such as losses.MSE")
    data = next(n for n in graph if n.type == "opaque.Arrays")
    node, port = info["outputs"][0].split(".")
    if loss_type == "losses.CrossEntropy":  # class indices: the module's own predictions
        npz = folder / data.params["path"]
        with np.load(npz) as archive:
            arrays = dict(archive)
        arrays["labels"] = np.asarray(arrays["output"]).argmax(-1).astype(np.int64)
        np.savez(npz, **arrays)
        graph.set_param(data.id, "y_key", "labels")
    loss_id = graph.add(loss_type, id=_free(graph, "loss"))
    graph.connect((node, port), (loss_id, "input"))
    graph.connect((data.id, "y"), (loss_id, "target"))
    added.append(loss_id)
    if optimizer:
        opt_type = OPTIMIZERS.get(optimizer, optimizer)
        if opt_type not in graph.registry or graph.registry.get(opt_type).kind != "optimizer":
            raise NodegraphError(f"--optimizer {optimizer}: not an optimizer block; use one of "
                                 f"{', '.join(OPTIMIZERS)} or a block id such as "
                                 "optimizers.Adam")
        opt_id = graph.add(opt_type, id=_free(graph, "optimizer"))
        graph.connect((loss_id, "loss"), (opt_id, "loss"))
        added.append(opt_id)
    return added


def _free(graph, name: str) -> str:
    i, candidate = 1, name
    while candidate in graph.nodes:
        i += 1
        candidate = f"{name}_{i}"
    return candidate
