"""A RealNVP normalising flow (Dinh et al. 2017) on the two moons.

Six generative.AffineCoupling layers with alternating masks (`flip` every other layer, so
each coordinate is transformed given the other in turn) map a moon point x to z; each
layer adds its log|det ∂y/∂x| to the running `log_det`. generative.FlowNLL is the exact
negative log-likelihood −log p(x) = ½‖z‖² + log 2π − log|det ∂z/∂x| under a standard
normal base, in nats per point, so training raises the log-likelihood of the data.

    nodegraph run examples/realnvp_moons.json

    python examples/builders/realnvp_moons.py
"""

from __future__ import annotations

from _classic import save_example, wire
from _generative import training

from nodegraph.model.graph import Graph

LAYERS = 6


def realnvp() -> Graph:
    g = Graph("realnvp-moons")
    g.add("data.Moons", id="data", n=2000, noise=5.0, normalize="zscore", batch_size=128)
    source = "data.x"
    for i in range(1, LAYERS + 1):
        g.add("generative.AffineCoupling", id=f"c{i}", flip=i % 2 == 0, hidden_features=64)
        wire(g, f"{source} -> c{i}.input")
        if i > 1:
            wire(g, f"c{i - 1}.log_det -> c{i}.log_det")
        source = f"c{i}.output"
    g.add("generative.FlowNLL", id="nll")
    g.add("optimizers.Adam", id="opt", lr=0.003)
    wire(g, f"{source} -> nll.z", f"c{LAYERS}.log_det -> nll.log_det", "nll.loss -> opt.loss")
    training(g, 150)
    return g


def build() -> dict[str, Graph]:
    return {"realnvp_moons": realnvp()}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
