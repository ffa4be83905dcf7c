"""The parameter grid of `nodegraph sweep` and the metric a sweep picks by default.

Both ways of sweeping read them: the grid run one process per combination
(`nodegraph.cli.sweep`) and the search on an Optuna study (`nodegraph.cli.sweep_search`,
where the grid's values become choices). They live here, below both, so neither imports
the other to get them.
"""

from __future__ import annotations

import json
from typing import Any

from nodegraph.model.errors import NodegraphError
from nodegraph.runtime.search import parse_value


def parse_grid(items: list[str]) -> dict[str, list[Any]]:
    """``NODE.PARAM=v1,v2`` (or a JSON list ``=[[1, 2], [3]]``) as target -> values."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        target, sep, raw = item.partition("=")
        target = target.strip()
        if not sep or "." not in target or not raw.strip():
            raise NodegraphError(f"--grid '{item}': write NODE.PARAM=v1,v2 (e.g. "
                                 "opt.lr=0.1,0.01)")
        if raw.strip().startswith("["):
            try:
                values = json.loads(raw)
            except json.JSONDecodeError as e:
                raise NodegraphError(f"--grid '{item}': the list is not JSON ({e})") from None
        else:
            values = [parse_value(v) for v in raw.split(",")]
        if target in grid:
            raise NodegraphError(f"--grid names {target} twice")
        grid[target] = values
    if not grid:
        raise NodegraphError("give at least one --grid NODE.PARAM=v1,v2")
    return grid


def default_metric(graph) -> str:
    """val.loss when the data keeps a validation split, else train.loss."""
    reg = graph.registry
    for node in graph:
        if node.type in reg and reg.get(node.type).kind == "data":
            spec = reg.get(node.type)
            values, _ = spec.resolve_params(node.params)
            if values.get("val_fraction") or values.get("folds"):
                return "val.loss"
    return "train.loss"
