"""A small Vision Transformer on the 8x8 digits (seed 003 §17; Dosovitskiy et al. 2021).

The image (N, 1, 8, 8) is cut into 2x2 patches, each embedded as a 64-vector (16 tokens);
a learned [CLS] token is prepended and a learned position vector added to each of the 17
tokens; two pre-LN Transformer encoder blocks mix them; the [CLS] token's final state,
layer-normalised, goes through a Linear head to the 10 classes. 20 % of the digits are the
test set, 20 % of the rest validate; the pixels are z-scored with the training statistics.
Training stops 10 epochs after the best validation loss and returns to those weights.

    python examples/builders/vit_digits.py
"""

from __future__ import annotations

from _classic import save_example, score, wire
from _networks import chain

from nodegraph.graph import Graph

D_MODEL = 64


def build_graph() -> Graph:
    g = Graph("vit-digits")
    g.add("data.Digits", id="data", size=8, layout="image", test_fraction=0.2,
          normalize="zscore", batch_size=64)
    g.add("attention.PatchEmbedding", id="patches", patch_size=2, embed_dim=D_MODEL)
    g.add("attention.ClsToken", id="cls")
    g.add("attention.LearnedPositionalEncoding", id="pos", max_len=17)
    g.add("attention.TransformerEncoderBlock", id="block1", nhead=4, dropout=0.1)
    g.add("attention.TransformerEncoderBlock", id="block2", nhead=4, dropout=0.1)
    g.add("attention.TakeToken", id="take", index=0)
    g.add("norm.LayerNorm", id="norm")
    g.add("layers.Linear", id="out", out_features=10)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.AdamW", id="opt", lr=0.002)
    wire(g, "data.x -> patches.input", "out.output -> loss.input", "data.y -> loss.target",
         "loss.loss -> opt.loss")
    chain(g, "patches", "cls", "pos", "block1", "block2", "take", "norm", "out")
    score(g, "out", accuracy="metrics.Accuracy")
    g.training.update(epochs=60, seed=0, device="auto", patience=10, monitor="val.loss")
    return g


def build() -> dict[str, Graph]:
    return {"vit_digits": build_graph()}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
