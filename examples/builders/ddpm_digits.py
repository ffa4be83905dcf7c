"""DDPM on the 8x8 digits with the shipped U-Net (group.UNet), sampled by the reverse chain.

The digits (pixels in [0, 1], flat rows of 64) are mapped to [−1, 1] as 2x − 1 (Scale and
a Constant −1 added); samplers.DDPMNoise gives x_t = √ᾱ_t·x_0 + √(1 − ᾱ_t)·ε (cosine
schedule, T = 100). The denoiser group reshapes x_t to (N, 1, 8, 8), runs the library's
group.UNet on it and t, and flattens the predicted ε back to rows of 64, the shape the
reverse-sampling procedure draws its x_T in; generative.DiffusionEpsLoss is
‖ε − ε_θ(x_t, t)‖². procedures.DDPMSample runs x_T ~ N(0, I) → x_0:

    nodegraph sample examples/ddpm_digits.json sample --train --set count=64

    python examples/builders/ddpm_digits.py
"""

from __future__ import annotations

from _classic import save_example, wire
from _generative import define_group, training

from nodegraph.model.graph import Graph

STEPS, EPOCHS = 100, 60


def denoiser() -> Graph:
    """Rows of 64 in and out, the U-Net on 8x8 images in between."""
    inside = Graph("denoiser")
    inside.add("layers.Reshape", id="image", shape=[1, 8, 8])
    inside.add("group.UNet", id="unet")
    inside.add("layers.Flatten", id="rows")
    wire(inside, "image.output -> unet.x", "unet.eps -> rows.input")
    return inside


def ddpm() -> Graph:
    g = Graph("ddpm-digits")
    g.add("data.Digits", id="data", batch_size=64)
    g.add("layers.Scale", id="twice", scale=2.0, learnable=False)
    g.add("layers.Constant", id="minus_one", value=-1.0)
    g.add("layers.Add", id="centred")
    define_group(g, "denoiser", denoiser(), {"x": ["image.input"], "t": ["unet.t"]},
                 {"eps": "rows.output"})
    g.add("samplers.DDPMNoise", id="noise", timesteps=STEPS, beta_end=0.2)
    g.add("group.denoiser", id="denoiser")
    g.add("generative.DiffusionEpsLoss", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.002)
    g.add("procedures.DDPMSample", id="sample", model="denoiser", noise="noise", count=64,
          every=10)
    wire(g, "data.x -> twice.input", "twice.output -> centred.a", "minus_one.output -> centred.b",
         "centred.output -> noise.x0", "noise.x_t -> denoiser.x", "noise.t -> denoiser.t",
         "denoiser.eps -> loss.eps_pred", "noise.eps -> loss.eps", "loss.loss -> opt.loss")
    training(g, EPOCHS)
    return g


def build() -> dict[str, Graph]:
    return {"ddpm_digits": ddpm()}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
