"""Bernoulli RBMs on the binarised 8x8 digits.

rbm_digits: data.Digits → activations.Step (a pixel is on where it has any ink, x > 0:
no block thresholds at 0.5) → energy.BernoulliRBM trained by CD-1 with plain SGD, the
exact log pseudo-likelihood averaged by energy.PseudoLikelihood (higher is better; published
values are scikit-learn's estimate on 28x28 MNIST, not
comparable with the 64 pixels here). Two procedures run Gibbs chains of the trained RBM:

    nodegraph sample examples/rbm_digits.json sample --train    # chains from noise
    nodegraph sample examples/rbm_digits.json inpaint --train   # the top half clamped

dbm_digits: a two-layer deep Boltzmann machine (its layers trained one
at a time): RBM 1 on the pixels, then RBM 2 on RBM 1's hidden probabilities, as two
training stages, RBM 1 frozen in the second. What makes the stack a DBM rather than two
RBMs is how it samples: procedures.DBMGibbs draws the middle layer from both the pixels
and the top layer, then the pixels and the top layer from the middle one, so samples and
inpainting go through both layers:

    nodegraph sample examples/dbm_digits.json sample --train
    nodegraph sample examples/dbm_digits.json inpaint --train

    python examples/builders/rbm.py
"""

from __future__ import annotations

from _classic import save_example, wire

from nodegraph.model.graph import Graph

EPOCHS, LR = 10, 0.2


def binarised_digits(g: Graph) -> None:
    g.add("data.Digits", id="data", batch_size=20)
    g.add("activations.Step", id="binary")
    wire(g, "data.x -> binary.input")


def rbm(g: Graph, node: str, source: str, hidden: int, opt: str) -> None:
    """An RBM on `source` ("node.port") with its own SGD and pseudo-likelihood metric."""
    g.add("energy.BernoulliRBM", id=node, n_components=hidden, pseudo_likelihood="exact")
    g.add("optimizers.SGD", id=opt, lr=LR)
    g.add("energy.PseudoLikelihood", id=f"pl_{node}")
    wire(g, f"{source} -> {node}.input", f"{node}.loss -> {opt}.loss",
         f"{node}.pseudo_likelihood -> pl_{node}.input")


def samplers(g: Graph, block: str, **models: str) -> None:
    """Two chains of `block` from noise: free samples, and the bottom half inpainted."""
    g.add(block, id="sample", **models, start="noise", steps=50, count=16, split="val",
          image_shape=[8, 8])
    g.add(block, id="inpaint", **models, start="noise", steps=50, count=16, split="val",
          clamp_rows=[0, 1, 2, 3], image_shape=[8, 8])


def rbm_digits() -> Graph:
    g = Graph("rbm-digits")
    binarised_digits(g)
    rbm(g, "rbm", "binary.output", 64, "opt")
    samplers(g, "procedures.GibbsChain", model="rbm")
    g.update_training(epochs=EPOCHS, seed=0, device="auto")
    return g


def dbm_digits() -> Graph:
    g = Graph("dbm-digits")
    binarised_digits(g)
    rbm(g, "rbm1", "binary.output", 64, "opt1")
    rbm(g, "rbm2", "rbm1.hidden", 32, "opt2")
    samplers(g, "procedures.DBMGibbs", model="rbm1", top="rbm2")
    g.update_training(epochs=2 * EPOCHS, seed=0, device="auto", stages=[
        {"name": "rbm1", "epochs": EPOCHS, "optimizers": ["opt1"]},
        {"name": "rbm2", "epochs": EPOCHS, "optimizers": ["opt2"], "frozen": ["rbm1"]}])
    return g


def build() -> dict[str, Graph]:
    return {"rbm_digits": rbm_digits(), "dbm_digits": dbm_digits()}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
