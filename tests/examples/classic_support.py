"""Shared by the tests of the regression, classification and optimizer examples.

`example` loads a graph file from examples/, `run` trains it with `--set`-style changes
(the same path as `nodegraph run --set`), and `assert_builder_writes_files` checks that a
builder script still produces the graphs kept in the repository's JSON files.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import nodegraph
from nodegraph.cli.common import with_assignments
from nodegraph.model.fileformat import dumps
from nodegraph.model.graph import Graph
from nodegraph.runtime.train import RunResult

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BUILDERS = EXAMPLES / "builders"


def example(name: str) -> Graph:
    """examples/<name>.json, loaded."""
    return nodegraph.load(EXAMPLES / f"{name}.json")


def variant(graph: Graph | str, **sets: Any) -> Graph:
    """A copy with ``node__param=value`` changes, as ``--set node.param=value`` makes them."""
    g = example(graph) if isinstance(graph, str) else graph
    return with_assignments(g, {k.replace("__", "."): v for k, v in sets.items()})


def run(graph: Graph | str, epochs: int | None = None, data_roots: tuple = (),
        **sets: Any) -> RunResult:
    """Train an example (or a graph) on the CPU with `sets` applied; `data_roots`: folders
    outside the example's own that its data may come from (a test's temporary files)."""
    g = variant(graph, **sets)
    if data_roots:
        g.data_roots = tuple(Path(r) for r in data_roots)
    return nodegraph.train(g, epochs=epochs, device="cpu")


def builder(name: str):
    """The builder module examples/builders/<name>.py, imported from its file."""
    if str(BUILDERS) not in sys.path:
        sys.path.insert(0, str(BUILDERS))  # builders import their sibling helper module
    spec = importlib.util.spec_from_file_location(f"builder_{name}", BUILDERS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_builder_writes_files(name: str) -> None:
    """Every graph the builder makes equals the example file it writes, but for the editor
    positions (they follow the auto-layout's spacing, which may change on its own)."""
    graphs = builder(name).build()
    assert graphs, f"builder {name} builds nothing"
    for file_name, graph in graphs.items():
        expected = json.loads(dumps(graph))
        actual = json.loads((EXAMPLES / f"{file_name}.json").read_text())
        assert set(actual["ui"]["positions"]) == set(graph.nodes), f"{file_name}: positions"
        expected.pop("ui"), actual.pop("ui")
        assert actual == expected, (f"examples/{file_name}.json is stale: run "
                                    f"python examples/builders/{name}.py")


def split_arrays(result, split: str = "train"):
    """(x, y) of a split of the example's `data` block, as float64/int numpy arrays."""
    tensors = result.compiled.datasets["data"].tensors(split)
    return tensors["x"].double().numpy(), tensors["y"].numpy()


def linear_scores(result, x, node: str = "linear"):
    """x Wᵀ + b with the trained weights of a Linear block, in float64."""
    layer = result.module.blocks[node]
    return x @ layer.weight.detach().double().numpy().T + layer.bias.detach().double().numpy()


def calibration(confidence, correct, n_bins: int) -> dict:
    """ECE and reliability-diagram bins written out: bin m holds confidences in
    ((m−1)/M, m/M]; ECE = Σ_m n_m/N·|accuracy_m − confidence_m|."""
    import numpy as np

    bins = np.clip(np.ceil(confidence * n_bins).astype(int) - 1, 0, n_bins - 1)
    count = np.bincount(bins, minlength=n_bins)
    conf = np.bincount(bins, confidence, n_bins)
    acc = np.bincount(bins, correct.astype(float), n_bins)
    ece = float(np.abs(acc - conf).sum() / len(confidence))
    with np.errstate(invalid="ignore"):
        return {"ece": ece, "count": count.tolist(), "confidence": conf / count,
                "accuracy": acc / count}


def reference_fit(model, x, y):
    """`model.fit(x, y)` on one BLAS/OpenMP thread: two test workers share two cores, and
    scikit-learn's threads spinning against each other made a 1 s fit take 100 s."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return model.fit(x, y)
