"""Helpers shared by the builders of the regression, classification and optimizer examples.

A builder makes its graph with the Python API and writes it through `save_example`, which
lays the nodes out for the editor (columns by depth, data on the left) and saves the file
with `nodegraph.save`, so a change to a builder regenerates its JSON reproducibly.
"""

from __future__ import annotations

from pathlib import Path

import nodegraph
from nodegraph.gui.canvas.layout import auto_layout
from nodegraph.model.graph import Graph

EXAMPLES = Path(__file__).resolve().parents[1]


def wire(g: Graph, *links: str) -> None:
    """Connect "node.port -> node.port" links, written the way the file format reads."""
    for link in links:
        src, dst = (part.strip().split(".") for part in link.split("->"))
        g.connect((src[0], src[1]), (dst[0], dst[1]))


def score(g: Graph, model: str, data: str = "data", **metrics: str) -> None:
    """Add metric blocks `name=type` reading the model's output against the data's y."""
    for name, block in metrics.items():
        g.add(block, id=name)
        wire(g, f"{model}.output -> {name}.input", f"{data}.y -> {name}.target")


def with_layout(g: Graph) -> Graph:
    """Store editor positions from the Qt-free auto-layout in the graph's UI data."""
    positions = auto_layout(g)
    g.replace_ui({"positions": {n: [round(x), round(y)] for n, (x, y) in positions.items()},
                  "comments": []})
    return g


def save_example(g: Graph, name: str) -> Path:
    """Lay out and save `g` as examples/<name>.json; returns the path written."""
    path = EXAMPLES / f"{name}.json"
    nodegraph.save(with_layout(g), path)
    print(f"wrote {path.relative_to(EXAMPLES.parent)}")
    return path


def save_all(graphs: dict[str, Graph]) -> None:
    """Save every graph of a builder's `build()` under its file name."""
    for name, graph in graphs.items():
        save_example(graph, name)


def classifier_metrics(g: Graph, model: str, n_bins: int = 10) -> None:
    """Accuracy and ECE (with its reliability-diagram bins) of the model's scores."""
    score(g, model, accuracy="metrics.Accuracy", ece="metrics.ECE")
    g.set_param("ece", "n_bins", n_bins)
