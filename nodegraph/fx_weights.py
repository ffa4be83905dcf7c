"""The weights file an imported graph references, loaded wherever the graph is compiled.

`nodegraph import` saves the module's weights beside the graph and writes their file name,
relative to the graph's folder, into ``graph.extra["imported"]["weights"]``. `compile`
loads them (so `run`, `export`, the editor and `nodegraph.compile` start from the
imported module, not from fresh random weights); a graph without that entry is untouched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from safetensors.torch import load_file

from nodegraph.errors import NodegraphError


def referenced(graph: Any) -> Path | None:
    """The weights file `graph` names, resolved against its folder; None when none."""
    name = (graph.extra.get("imported") or {}).get("weights") if isinstance(
        graph.extra, dict) else None
    if not isinstance(name, str) or not name:
        return None
    path = Path(name)
    if not path.is_absolute() and graph.folder is not None:
        path = Path(graph.folder) / path
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
    missing = sorted(set(expected) - set(weights))
    wrong = sorted(k for k in set(expected) & set(weights)
                   if tuple(expected[k].shape) != tuple(weights[k].shape))
    if missing or wrong:
        shown = ", ".join((missing + wrong)[:5])
        raise NodegraphError(f"{path} does not fit the graph (keys node.param): {shown} "
                             f"{'missing' if missing else 'of another shape'}; the graph was "
                             "changed since it was imported: remove extra.imported.weights "
                             "or export the weights again")
    compiled.module.load_block_state({k: v for k, v in weights.items() if k in expected})
    return path
