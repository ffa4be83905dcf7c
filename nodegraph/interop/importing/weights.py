"""The weights `nodegraph import` saved beside a graph, loaded into its compiled form."""

from __future__ import annotations

from nodegraph.model.errors import NodegraphError
from nodegraph.runtime import referenced_weights as fx_weights


def load_weights(compiled) -> None:
    """Load the weights `nodegraph import` saved beside an imported graph."""
    from safetensors.torch import load_file

    from nodegraph.interop.export.weights import load_weights as load

    path = fx_weights.referenced(compiled.graph)
    if path is None:
        raise NodegraphError("this graph was not made by nodegraph import: it names no weights")
    load(compiled, load_file(str(path)))
