"""The weights file an imported graph references, loaded wherever the graph is compiled.

`nodegraph import` saves the module's weights beside the graph and writes their file name,
relative to the graph's folder, into ``graph.extra["imported"]["weights"]``. `compile`
loads them (so `run`, `export`, the editor and `nodegraph.compile` start from the
imported module, not from fresh random weights); nodes added or changed since the import
keep fresh weights (with a warning naming them); a graph without that entry is untouched.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from safetensors.torch import load_file

from nodegraph.kinds import confine
from nodegraph.model.errors import NodegraphError
from nodegraph.model.safe_read import require_regular


def referenced(graph: Any) -> Path | None:
    """The weights file `graph` names, resolved against its folder; None when none."""
    name = (graph.extra.get("imported") or {}).get("weights") if isinstance(
        graph.extra, dict) else None
    if not isinstance(name, str) or not name:
        return None
    path = Path(name)
    if graph.folder is None:
        return path
    if not path.is_absolute():
        path = Path(graph.folder) / path
    with confine.allowing(getattr(graph, "data_roots", ())):  # beside the graph, or allowed
        path = confine.inside(name, path, Path(graph.folder))
    require_regular(path, "the graph's weights file")  # not a FIFO or a device
    return path


def load_referenced(compiled: Any, graph: Any) -> Path | None:
    """Load the referenced weights into `compiled`; the file loaded, or None."""
    path = referenced(graph)
    if path is None:
        return None
    if not path.is_file():
        raise NodegraphError(f"the graph's weights file {path} is missing (the graph names it "
                             "in extra.imported.weights): put it back beside the graph, or "
                             "remove that entry to start from fresh weights")
    try:
        weights = load_file(str(path))
    except Exception as e:
        raise NodegraphError(f"{path}: not a readable safetensors file ({e})") from None
    expected = compiled.module.block_state()
    fits = {k: v for k, v in weights.items()
            if k in expected and tuple(expected[k].shape) == tuple(v.shape)}
    if expected and not fits:
        raise NodegraphError(f"{path} does not fit the graph (keys node.param): none of its "
                             "weights match; remove extra.imported.weights from the graph to "
                             "start from fresh weights")
    fresh = sorted({k.partition(".")[0] for k in set(expected) - set(fits)})
    if fresh:  # nodes added or changed since the import start from fresh weights
        warnings.warn(f"{path.name}: {len(fresh)} node(s) changed since the import start from "
                      f"fresh weights: {', '.join(fresh[:8])}" + (" ..." if len(fresh) > 8
                                                                  else ""), stacklevel=2)
    compiled.module.load_block_state(fits, strict=False)
    return path
