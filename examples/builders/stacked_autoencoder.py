"""A stacked autoencoder classifier, pre-trained greedily layer by layer.

Greedy layer-wise pre-training in three training stages on the 8x8 digits:

1. `pretrain1`: enc1 (64 → h1) and dec1 reconstruct the pixels x (optimizer opt1);
2. `pretrain2`: enc2 (h1 → h2) and dec2 reconstruct the code h1, enc1 frozen (opt2);
3. `finetune`: a softmax head (h2 → 10) on enc2 is trained for the digit classes with
   the cross-entropy, end to end through both encoders (opt3).

stacked_autoencoder_frozen.json is the same graph whose last stage keeps enc1 and enc2
frozen, so only the head learns: a course exercise's "pre-trained" row against the "fine-tuned"
one (fine-tuning wins across the board). Widths are (h1, h2) = (32, 16), the exercise's
"h1 = 2·h2" rule on 64 pixels instead of 784; `--set enc1.out_features=...
enc2.out_features=...` tries the others.

    python examples/builders/stacked_autoencoder.py
"""

from __future__ import annotations

from _classic import save_example, score, wire
from _generative import layers, training

from nodegraph.model.graph import Graph

PRETRAIN_EPOCHS, FINETUNE_EPOCHS = 15, 15


def stacked(name: str, freeze_encoders: bool) -> Graph:
    g = Graph(name.replace("_", "-"))
    g.add("data.Digits", id="data", test_fraction=0.2, batch_size=32)
    # autoencoder 1: x → h1 → x̂
    layers(g, "data.x", ("enc1", "layers.Linear", {"out_features": 32}),
           ("h1", "activations.Sigmoid", {}))
    layers(g, "h1.output", ("dec1", "layers.Linear", {"out_features": 64}),
           ("recon1", "activations.Sigmoid", {}))
    # autoencoder 2: h1 → h2 → ĥ1 (its target is h1 itself)
    layers(g, "h1.output", ("enc2", "layers.Linear", {"out_features": 16}),
           ("h2", "activations.Sigmoid", {}))
    layers(g, "h2.output", ("dec2", "layers.Linear", {"out_features": 32}),
           ("recon2", "activations.Sigmoid", {}))
    g.add("layers.StopGradient", id="h1_target")  # a target to reach, not to move
    # the classifier: softmax head on the second code
    g.add("layers.Linear", id="head", out_features=10)
    g.add("losses.MSE", id="loss1")
    g.add("losses.MSE", id="loss2")
    g.add("losses.CrossEntropy", id="loss3")
    for opt, scope in (("opt1", ["enc1", "dec1"]), ("opt2", ["enc2", "dec2"]),
                       ("opt3", [])):
        g.add("optimizers.Adam", id=opt, lr=0.01, scope=scope)
    wire(g, "h2.output -> head.input",
         "recon1.output -> loss1.input", "data.x -> loss1.target", "loss1.loss -> opt1.loss",
         "h1.output -> h1_target.input", "recon2.output -> loss2.input",
         "h1_target.output -> loss2.target", "loss2.loss -> opt2.loss",
         "head.output -> loss3.input", "data.y -> loss3.target", "loss3.loss -> opt3.loss")
    score(g, "head", accuracy="metrics.Accuracy")
    finetune_frozen = ["enc1", "enc2"] if freeze_encoders else []
    training(g, 2 * PRETRAIN_EPOCHS + FINETUNE_EPOCHS, stages=[
        {"name": "pretrain1", "epochs": PRETRAIN_EPOCHS, "optimizers": ["opt1"],
         "frozen": []},
        {"name": "pretrain2", "epochs": PRETRAIN_EPOCHS, "optimizers": ["opt2"],
         "frozen": ["enc1"]},
        {"name": "finetune", "epochs": FINETUNE_EPOCHS, "optimizers": ["opt3"],
         "frozen": finetune_frozen}])
    return g


def build() -> dict[str, Graph]:
    return {"stacked_autoencoder": stacked("stacked_autoencoder", False),
            "stacked_autoencoder_frozen": stacked("stacked_autoencoder_frozen", True)}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
