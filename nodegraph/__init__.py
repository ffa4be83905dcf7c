"""nodegraph: build machine-learning models as graphs of blocks and train them with PyTorch.

The path of data is one straight walk: file -> `Graph` -> `validate` -> `compile` ->
`train` -> events -> CLI or editor. This package is the Qt-free core; the editor lives in
`nodegraph.gui` and the blocks in the separate `nodes` package.

    import nodegraph
    g = nodegraph.load("examples/xor.json")
    g.set_param("opt", "lr", 0.1)
    result = nodegraph.train(g, epochs=300)
    print(result.final["train"]["accuracy"])
"""

from nodegraph.allowlist import trust
from nodegraph.compile import compile
from nodegraph.errors import NodegraphError, Problem, ValidationError
from nodegraph.fileformat import load, loads, save
from nodegraph.graph import Edge, Graph, Node
from nodegraph.spec import Registry, default_registry
from nodegraph.train import RunControl, RunResult, train
from nodegraph.validate import Report, validate

__version__ = "0.1.0"

__all__ = [
    "Edge", "Graph", "Node", "NodegraphError", "Problem", "Registry", "Report", "RunControl",
    "RunResult", "ValidationError", "compile", "default_registry", "load", "loads", "save",
    "train", "trust", "validate",
]
