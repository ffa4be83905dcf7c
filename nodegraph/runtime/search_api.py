"""`nodegraph.search(graph, space, trials=...)`: a hyperparameter search from Python.

    result = nodegraph.search(g, {"opt.lr": "loguniform:1e-4:1", "hidden.out_features":
                                  [2, 4, 8]}, trials=20, epochs=50)
    result.best.params, result.best.value

The same search as `nodegraph sweep --search` (`nodegraph.runtime.search`): each trial
trains a copy of `graph` with the drawn values in this process, the watched number goes to
Optuna after every epoch, and the pruner (median by default, warming up for a quarter of
the epochs and 5 trials) ends hopeless trials. A space is written as on the command line
(`float:LOW:HIGH[:STEP]`, `loguniform:LOW:HIGH`, `int:LOW:HIGH[:STEP]`, `logint:LOW:HIGH`,
`choice:v1,v2`) or given as a list of values (a choice).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph
from nodegraph.runtime import search as searching
from nodegraph.runtime.search import SearchResult, Space


def search(graph: Graph, space: Mapping[str, Any], *, trials: int | None = None,
           metric: str | None = None, sampler: str = "tpe", pruner: str = "median",
           epochs: int | None = None, storage: str | None = None,
           study_name: str | None = None, seed: int | None = None,
           echo: Callable[[str], None] | None = None) -> SearchResult:
    """Search `space` ({"node.param" or "training.key": spec text or list of values}) on
    `graph` and return the trials and the best one. `metric` is val.loss when the data keeps
    a validation split, else train.loss; `echo` prints a line per trial (quiet without)."""
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise NodegraphError("nodegraph.search needs Optuna: pip install "
                             "'nodegraph[search]'") from None
    if not isinstance(space, Mapping) or not space:
        raise NodegraphError("space: give a dict of {'node.param': 'KIND:...' or [values]}, "
                             "e.g. {'opt.lr': 'loguniform:1e-4:1e-1'}")
    spaces = [_space(target, spec) for target, spec in space.items()]
    for s in spaces:
        node = s.target.partition(".")[0]
        if node != "training" and node not in graph.nodes:
            raise NodegraphError(f"space {s.target}: no node '{node}' in the graph (nodes: "
                                 f"{', '.join(graph.nodes)})")
    base = graph.copy()

    def build(params: dict[str, Any]) -> Graph:
        g = base.copy()
        for target, value in params.items():
            node, _, name = target.partition(".")
            if node == "training":
                g.set_training(name, value)
            else:
                g.set_param(node, name, value)
        return g

    return searching.search(build, spaces, metric or default_metric(graph), sampler=sampler,
                            trials=trials, pruner=pruner, storage=storage,
                            study_name=study_name or graph.name, epochs=epochs, seed=seed,
                            echo=echo or (lambda _line: None))


def default_metric(graph: Graph) -> str:
    """val.loss when the data keeps a validation split, else train.loss."""
    reg = graph.registry
    for node in graph:
        if node.type in reg and reg.get(node.type).kind == "data":
            values, _ = reg.get(node.type).resolve_params(node.params)
            if values.get("val_fraction") or values.get("folds"):
                return "val.loss"
    return "train.loss"


def _space(target: str, spec: Any) -> Space:
    if isinstance(spec, Space):
        return spec
    if isinstance(spec, list | tuple):
        if not spec:
            raise NodegraphError(f"space {target}: the list of values is empty")
        return Space(str(target), "choice", choices=tuple(spec))
    if isinstance(spec, str):
        return searching.parse_space(f"{target}={spec}")
    raise NodegraphError(f"space {target}: write 'KIND:...' (e.g. 'loguniform:1e-4:1') or "
                         f"give a list of values, not {type(spec).__name__}")
