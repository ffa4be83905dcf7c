"""nodegraph: build machine-learning models as graphs of blocks and train them with PyTorch.

The path of data is one straight walk: file -> `Graph` -> `validate` -> `compile` ->
`train` -> events -> CLI or editor. This package is the Qt-free core; the editor lives in
`nodegraph.gui` and the blocks in the separate `nodes` package.

    import nodegraph
    g = nodegraph.load("examples/xor.json")
    g.set_param("opt", "lr", 0.1)
    result = nodegraph.train(g, epochs=300)
    print(result.final["train"]["accuracy"])

    model = nodegraph.fit(g, epochs=300)    # a Model: fit more, predict, save, export
    model = nodegraph.fit(g, x=X, y=Y, validation_data=(Xv, Yv), epochs=20)  # your arrays
    model.fit(epochs=50)
    model.predict("test"); model.save("xor.ngz"); nodegraph.load_model("xor.ngz")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The public API, imported on first use (PEP 562): `import nodegraph` and `nodegraph --help`
# cost no torch import; `nodegraph.Graph` brings in what it needs. A name served under
# another name is "module:name": `nodegraph.compile` is `compile_graph`, so no module (this
# one included) defines a `compile` that shadows the builtin.
_API = {
    "trust": "nodegraph.model.allowlist",
    "compile": "nodegraph.runtime.compile:compile_graph",
    "forward": "nodegraph.runtime.forward",
    "NodegraphError": "nodegraph.model.errors",
    "Problem": "nodegraph.model.errors",
    "ValidationError": "nodegraph.model.errors",
    "load": "nodegraph.model.fileformat",
    "loads": "nodegraph.model.fileformat",
    "save": "nodegraph.model.fileformat",
    "Edge": "nodegraph.model.graph",
    "Graph": "nodegraph.model.graph",
    "Node": "nodegraph.model.graph",
    "Registry": "nodegraph.model.spec",
    "default_registry": "nodegraph.model.spec",
    "RunControl": "nodegraph.runtime.train",
    "RunResult": "nodegraph.runtime.train",
    "train": "nodegraph.runtime.train",
    "Report": "nodegraph.check.validate",
    "validate": "nodegraph.check.validate",
    "Model": "nodegraph.interop.model",
    "fit": "nodegraph.interop.model",
    "load_model": "nodegraph.interop.model",
    "summary": "nodegraph.check.summary",
    "Callback": "nodegraph.runtime.callbacks.base",
    "TrainerView": "nodegraph.runtime.callbacks.base",
    "LoopState": "nodegraph.runtime.callbacks.base",
    "search": "nodegraph.runtime.search_api",
}

if TYPE_CHECKING:
    from nodegraph.check.summary import summary
    from nodegraph.check.validate import Report, validate
    from nodegraph.interop.model import Model, fit, load_model
    from nodegraph.model.allowlist import trust
    from nodegraph.model.errors import NodegraphError, Problem, ValidationError
    from nodegraph.model.fileformat import load, loads, save
    from nodegraph.model.graph import Edge, Graph, Node
    from nodegraph.model.spec import Registry, default_registry
    from nodegraph.runtime.callbacks.base import Callback, LoopState, TrainerView
    from nodegraph.runtime.forward import forward
    from nodegraph.runtime.search_api import search
    from nodegraph.runtime.train import RunControl, RunResult, train


def __getattr__(name: str) -> Any:
    where = _API.get(name)
    if where is None:
        raise AttributeError(f"module 'nodegraph' has no attribute {name!r}")
    module, _, attribute = where.partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))


__version__ = "0.1.0"

# `compile` is public (`nodegraph.compile`) but left out of `from nodegraph import *`, which
# would shadow the builtin in the importing module.
__all__ = [
    "Callback", "Edge", "Graph", "LoopState", "Model", "Node", "NodegraphError", "Problem",
    "Registry", "Report", "RunControl", "RunResult", "TrainerView", "ValidationError",
    "default_registry", "fit", "forward", "load", "load_model", "loads", "save",
    "search", "summary", "train", "trust", "validate",
]
