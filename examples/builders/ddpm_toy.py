"""DDPM (Ho et al. 2020) on the two moons, in 2-D so it can be seen.

Training: samplers.DDPMNoise draws a step t and noise ε and gives x_t = √ᾱ_t·x_0 +
√(1 − ᾱ_t)·ε (cosine schedule, T = 100); the denoiser group embeds t
(generative.TimestepEmbedding), concatenates it with x_t and predicts ε with an MLP;
generative.DiffusionEpsLoss is ‖ε − ε_θ(x_t, t)‖². Sampling is procedures.DDPMSample, the
reverse chain x_T ~ N(0, I) → x_0 with the same schedule, a frame every 10 steps:

    nodegraph sample examples/ddpm_toy.json sample --train --set count=500

    python examples/builders/ddpm_toy.py
"""

from __future__ import annotations

from _classic import save_example, wire
from _generative import body, define_group, training

from nodegraph.model.graph import Graph

HIDDEN, STEPS = 128, 100


def denoiser() -> Graph:
    inside = body("denoiser", ("embed", "generative.TimestepEmbedding", {"embedding_dim": 16}))
    inside.add("layers.Concat", id="join", dim=1)
    wire(inside, "embed.output -> join.b")
    for node, block, params in (("fc1", "layers.Linear", {"out_features": HIDDEN}),
                                ("act1", "activations.ReLU", {}),
                                ("fc2", "layers.Linear", {"out_features": HIDDEN}),
                                ("act2", "activations.ReLU", {}),
                                ("eps", "layers.Linear", {"out_features": 2})):
        inside.add(block, id=node, **params)
    wire(inside, "join.output -> fc1.input", "fc1.output -> act1.input",
         "act1.output -> fc2.input", "fc2.output -> act2.input", "act2.output -> eps.input")
    return inside


def ddpm() -> Graph:
    g = Graph("ddpm-toy")
    g.add("data.Moons", id="data", n=2000, noise=5.0, normalize="zscore", batch_size=128)
    define_group(g, "denoiser", denoiser(), {"x": ["join.a"], "t": ["embed.input"]},
                 {"eps": "eps.output"})
    g.add("samplers.DDPMNoise", id="noise", timesteps=STEPS, schedule="cosine")
    g.add("group.denoiser", id="denoiser")
    g.add("generative.DiffusionEpsLoss", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.002)
    g.add("procedures.DDPMSample", id="sample", model="denoiser", noise="noise", count=200,
          every=10)
    wire(g, "data.x -> noise.x0", "noise.x_t -> denoiser.x", "noise.t -> denoiser.t",
         "denoiser.eps -> loss.eps_pred", "noise.eps -> loss.eps", "loss.loss -> opt.loss")
    training(g, 200)
    return g


def build() -> dict[str, Graph]:
    return {"ddpm_toy": ddpm()}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
