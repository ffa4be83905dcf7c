"""The GAN of seed 004 §4.2 (E24, L448-476) as MLPs on the 8x8 digits.

generator (group): z (16, from samplers.PriorSample) → Linear 128 → LeakyReLU →
Linear 64 → Sigmoid. discriminator (group): x → Linear 128 → LeakyReLU → Linear 1, a
logit. The discriminator is instanced three times with one set of weights (`share`):
d_real on the data, d_fake on the generated batch behind a StopGradient (the D step must
not push gradients into G) and d_gen on the generated batch itself (the G step needs the
gradient through D). Two optimizers take turns on each batch, each over its own scope:
opt_d minimises −E log D(x) − E log(1 − D(G(z))), opt_g the non-saturating
−E log D(G(z)) (the notes' footnote 16), both Adam with β₁ = 0.5 as the notes suggest.

    nodegraph sample examples/gan_digits.json samples --train

    python examples/builders/gan_digits.py
"""

from __future__ import annotations

from _classic import save_example, wire
from _generative import body, define_group, training

from nodegraph.graph import Graph

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
    define_group(g, "generator", generator(), {"z": ["hidden.input"]},
                 {"fake": "pixels.output"})
    define_group(g, "discriminator", discriminator(), {"x": ["hidden.input"]},
                 {"logits": "logit.output"})
    g.add("samplers.PriorSample", id="noise", latent_dim=LATENT)
    g.add("group.generator", id="generator")
    g.add("layers.StopGradient", id="detach")
    g.add("group.discriminator", id="d_real")
    g.add("group.discriminator", id="d_fake", share="d_real")
    g.add("group.discriminator", id="d_gen", share="d_real")
    g.add("generative.GANDiscriminatorLoss", id="d_loss")
    g.add("generative.GANGeneratorLoss", id="g_loss", form="non_saturating")
    # scopes name the instances' inner nodes (INSTANCE__INNER): validation checks scopes
    # on the flattened graph, where the instance ids themselves are unknown
    g.add("optimizers.Adam", id="opt_d", scope=["d_real__hidden", "d_real__logit"], **ADAM)
    g.add("optimizers.Adam", id="opt_g", scope=["generator__hidden", "generator__out"],
          **ADAM)
    g.add("procedures.SamplePrior", id="samples", model="generator", count=16,
          image_shape=[8, 8])
    wire(g, "data.x -> noise.like", "noise.output -> generator.z",
         "generator.fake -> detach.input", "data.x -> d_real.x", "detach.output -> d_fake.x",
         "generator.fake -> d_gen.x", "d_real.logits -> d_loss.real_logits",
         "d_fake.logits -> d_loss.fake_logits", "d_gen.logits -> g_loss.fake_logits",
         "d_loss.loss -> opt_d.loss", "g_loss.loss -> opt_g.loss")
    training(g, 100)
    return g


def build() -> dict[str, Graph]:
    return {"gan_digits": gan()}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
