"""A GAN (Goodfellow et al. 2014) as MLPs on the 8x8 digits.

generator (group): z (16, from samplers.PriorSample) → Linear 128 → LeakyReLU →
Linear 64 → Sigmoid. discriminator (group): x → Linear 128 → LeakyReLU → Linear 1, a
logit. The discriminator is instanced three times with one set of weights (`share`):
d_real on the data, d_fake on the generated batch behind a StopGradient (the D step must
not push gradients into G) and d_gen on the generated batch itself (the G step needs the
gradient through D). Two optimizers take turns on each batch, each over its own scope:
opt_d minimises −E log D(x) − E log(1 − D(G(z))), opt_g the non-saturating
−E log D(G(z)) (the non-saturating loss), both Adam with β₁ = 0.5 (Radford et al.).

    nodegraph sample examples/gan_digits.json samples --train

    python examples/builders/gan_digits.py
"""

from __future__ import annotations

from _classic import save_example, wire
from _generative import adversarial_game, body, training

from nodegraph.model.graph import Graph

LATENT, HIDDEN = 16, 128
ADAM = {"lr": 0.001, "betas": [0.5, 0.999]}


def generator() -> Graph:
    return body("generator", ("hidden", "layers.Linear", {"out_features": HIDDEN}),
                ("act", "activations.LeakyReLU", {"negative_slope": 0.2}),
                ("out", "layers.Linear", {"out_features": 64}),
                ("pixels", "activations.Sigmoid", {}))


def discriminator() -> Graph:
    return body("discriminator", ("hidden", "layers.Linear", {"out_features": HIDDEN}),
                ("act", "activations.LeakyReLU", {"negative_slope": 0.2}),
                ("logit", "layers.Linear", {"out_features": 1}))


def gan() -> Graph:
    g = Graph("gan-digits")
    g.add("data.Digits", id="data", batch_size=32)
    wire(g, *adversarial_game(g, generator(), discriminator(), LATENT, "data.x",
                              ("hidden", "hidden"),
                              (["d_real__hidden", "d_real__logit"],
                               ["generator__hidden", "generator__out"]), ADAM))
    training(g, 100)
    return g


def build() -> dict[str, Graph]:
    return {"gan_digits": gan()}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
