"""A variational autoencoder on the 8x8 digits.

encoder (group): x (64) → Linear 128 → ReLU → two heads, μ and log σ² (latent 8 each);
samplers.Reparameterize draws z = μ + σ·ε; decoder (group): z → Linear 128 → ReLU →
Linear 64 → Sigmoid gives Bernoulli means for the pixels; generative.ELBO is the
negative ELBO, BCE reconstruction + KL(q(z|x) ‖ N(0, I)), summed over pixels and codes
and averaged over the batch. The decoder and encoder are group instances, so two
procedures can call them after training:

    nodegraph sample examples/vae_digits.json prior --train        # decode z ~ N(0, I)
    nodegraph sample examples/vae_digits.json interpolate --train  # digits morphing into each other

    python examples/builders/vae_digits.py
"""

from __future__ import annotations

from _classic import save_example, wire
from _generative import body, define_group, training

from nodegraph.model.graph import Graph

LATENT, HIDDEN = 8, 128


def encoder() -> Graph:
    inside = body("encoder", ("hidden", "layers.Linear", {"out_features": HIDDEN}),
                  ("act", "activations.ReLU", {}),
                  ("mu", "layers.Linear", {"out_features": LATENT}))
    inside.add("layers.Linear", id="logvar", out_features=LATENT)
    wire(inside, "act.output -> logvar.input")
    return inside


def decoder() -> Graph:
    return body("decoder", ("hidden", "layers.Linear", {"out_features": HIDDEN}),
                ("act", "activations.ReLU", {}), ("out", "layers.Linear", {"out_features": 64}),
                ("pixels", "activations.Sigmoid", {}))


def vae() -> Graph:
    g = Graph("vae-digits")
    g.add("data.Digits", id="data", test_fraction=0.2, batch_size=32)
    define_group(g, "encoder", encoder(), {"x": ["hidden.input"]},
                 {"mu": "mu.output", "logvar": "logvar.output"})
    define_group(g, "decoder", decoder(), {"z": ["hidden.input"]}, {"recon": "pixels.output"})
    g.add("group.encoder", id="encoder")
    g.add("samplers.Reparameterize", id="sample")
    g.add("group.decoder", id="decoder")
    g.add("generative.ELBO", id="elbo", reconstruction="bce")
    g.add("metrics.Mean", id="nll")  # the two parts of −ELBO, reported every epoch
    g.add("metrics.Mean", id="kl")
    g.add("optimizers.Adam", id="opt", lr=0.002)
    g.add("procedures.SamplePrior", id="prior", model="decoder", count=16,
          image_shape=[8, 8])
    g.add("procedures.Interpolate", id="interpolate", model="decoder", encoder="encoder",
          index_a=0, index_b=1, steps=9, image_shape=[8, 8])
    wire(g, "data.x -> encoder.x", "encoder.mu -> sample.mu",
         "encoder.logvar -> sample.logvar", "sample.z -> decoder.z",
         "decoder.recon -> elbo.recon", "data.x -> elbo.target", "encoder.mu -> elbo.mu",
         "encoder.logvar -> elbo.logvar", "elbo.loss -> opt.loss", "elbo.nll -> nll.input",
         "elbo.kl -> kl.input")
    training(g, 60)
    return g


def build() -> dict[str, Graph]:
    return {"vae_digits": vae()}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
