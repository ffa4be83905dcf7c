"""An all-convolutional variant of the digits CNN: 1×1 and strided convolutions.

The digits CNN (cnn_digits.json) downsamples with max-pooling and classifies with a dense
layer on the flattened 5×5×64 maps (16,010 of its 34,826 parameters). Here, as in
Springenberg et al. ("Striving for simplicity: the all convolutional net", 2015), each
max-pool becomes a 3×3 convolution with stride 2 of the same width, and the dense layer
becomes a 1×1 convolution — a dense layer applied at every position, 64 channels to 10
class scores (650 parameters) — followed by a global average pool over the 4×4 score
maps (Lin et al., "Network in network", 2014). No pooling layer, no dense layer:
Conv 3×3×32 → Conv 3×3×32 /2 → Conv 3×3×64 → Conv 3×3×64 /2 → Conv 1×1×10 → GAP,
ReLU between, 320 + 9,248 + 18,496 + 36,928 + 650 = 65,642 parameters. The learnable
downsampling costs more than the dense head saves. Data, batches, optimizer (Adam 0.001),
epochs and early stopping are those of cnn_digits.json, so the two compare like for like.

    python examples/builders/cnn_digits_allconv.py
"""

from __future__ import annotations

from _classic import save_all, score, wire
from _networks import chain

from nodegraph.model.graph import Graph


def build() -> dict[str, Graph]:
    g = Graph("cnn-digits-allconv")
    g.add("data.Digits", id="data", size=28, layout="image", val_fraction=0.1,
          test_fraction=0.2, batch_size=32)
    layers = []
    for name, channels, stride in (("conv1", 32, 1), ("down1", 32, 2), ("conv2", 64, 1),
                                   ("down2", 64, 2)):
        g.add("layers.Conv2d", id=name, out_channels=channels, kernel_size=3, stride=stride)
        g.add("activations.ReLU", id=f"relu_{name}")
        layers += [name, f"relu_{name}"]
    g.add("layers.Conv2d", id="classify", out_channels=10, kernel_size=1)
    g.add("layers.GlobalAvgPool", id="out")
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.001)
    wire(g, "data.x -> conv1.input", "out.output -> loss.input", "data.y -> loss.target",
         "loss.loss -> opt.loss")
    chain(g, *layers, "classify", "out")
    score(g, "out", accuracy="metrics.Accuracy")
    g.update_training(epochs=60, seed=0, device="auto", patience=10, monitor="val.loss")
    return {"cnn_digits_allconv": g}


if __name__ == "__main__":
    save_all(build())
