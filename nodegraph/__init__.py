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

from nodegraph.check.validate import Report, validate
from nodegraph.model.allowlist import trust
from nodegraph.model.errors import NodegraphError, Problem, ValidationError
from nodegraph.model.fileformat import load, loads, save
from nodegraph.model.graph import Edge, Graph, Node
from nodegraph.model.spec import Registry, default_registry
from nodegraph.runtime.compile import compile
from nodegraph.runtime.train import RunControl, RunResult, train

__version__ = "0.1.0"

__all__ = [
    "Edge", "Graph", "Node", "NodegraphError", "Problem", "Registry", "Report", "RunControl",
    "RunResult", "ValidationError", "compile", "default_registry", "load", "loads", "save",
    "train", "trust", "validate",
]
