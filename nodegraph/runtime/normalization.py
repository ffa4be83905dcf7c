"""A data block's fitted normalisation, saved with the weights and applied to raw inputs.

A model trained on normalised data predicts right only on inputs scaled the same way. The
statistics (`Dataset.normalization`: per port, `centre` and `scale` such that the port
holds (raw − centre) / scale) travel in the weights file and the checkpoint beside the
weights, under keys ``normalization/<data node>/<port>.centre`` and ``….scale`` — a prefix
no `node.param` weight key can have, so weight loaders that do not know it skip it
(`GraphModule.load_block_state`) and files written before it load as they did.

Loading such a file (`nodegraph.interop.export.weights.load_weights`: ``forward``, ``run
--init-weights``, ``export``) puts the saved statistics on the data block, re-scaling its
own tensors with them, and `nodegraph.forward` scales inputs given to a data block's port
with them (`nodegraph.runtime.preprocess`, with the rest of the model's preprocessing):
``nodegraph forward GRAPH --weights W --inputs RAW.npz`` takes raw values, as the data
files hold them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from nodegraph.model.errors import NodegraphError

PREFIX = "normalization/"
FIELDS = ("centre", "scale")


def state(compiled: Any) -> dict[str, torch.Tensor]:
    """Every data block's fitted normalisation, keyed as the weights file stores it (none
    for a run without datasets)."""
    datasets = getattr(compiled, "datasets", None) or {}
    return {f"{PREFIX}{node}/{key}": value for node, ds in datasets.items()
            for key, value in ds.normalization_state().items()}


def with_weights(compiled: Any, weights: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`weights` and the normalisation, as one file holds them."""
    return {**weights, **state(compiled)}


def split(tensors: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor],
                                                        dict[str, torch.Tensor]]:
    """(the weights, the normalisation entries) of a file's tensors."""
    weights = {k: v for k, v in tensors.items() if not k.startswith(PREFIX)}
    saved = {k: v for k, v in tensors.items() if k.startswith(PREFIX)}
    return weights, saved


def apply(compiled: Any, saved: Mapping[str, torch.Tensor], source: Any = None) -> int:
    """Put saved statistics on the graph's data blocks (their tensors re-scaled with them);
    the number of ports set. An entry the graph cannot take is an error naming it."""
    where = f"the weights in '{source}'" if source else "the weights"
    by_port: dict[tuple[str, str], dict[str, torch.Tensor]] = {}
    for key, value in saved.items():
        node, _, rest = key.removeprefix(PREFIX).partition("/")
        port, _, field = rest.rpartition(".")
        if not node or not port or field not in FIELDS:
            raise NodegraphError(f"{where}: '{key}' is not a normalisation entry "
                                 f"({PREFIX}NODE/PORT.centre or .scale); the file is damaged")
        by_port.setdefault((node, port), {})[field] = value
    for (node, port), stats in by_port.items():
        ds = compiled.datasets.get(node)
        if ds is None:
            raise NodegraphError(f"{where}: the normalisation of '{node}.{port}' names no data "
                                 "block of this graph; load the file into the graph that "
                                 "wrote it")
        if set(stats) != set(FIELDS):
            raise NodegraphError(f"{where}: the normalisation of '{node}.{port}' lacks "
                                 f"{', '.join(sorted(set(FIELDS) - set(stats)))}")
        fitted = ds.normalization.get(port)
        if fitted is None:
            raise NodegraphError(f"{where}: the model was trained on '{node}.{port}' "
                                 "normalised, but the data block here does not normalise it; "
                                 f"set '{node}'s normalize param as it was in training")
        if any(stats[f].shape != fitted[f].shape for f in FIELDS):
            raise NodegraphError(f"{where}: the normalisation of '{node}.{port}' has shape "
                                 f"{tuple(stats['centre'].shape)} but the data block's port "
                                 f"has {tuple(fitted['centre'].shape)} values per sample")
        ds.renormalize(port, stats["centre"], stats["scale"])
    return len(by_port)

