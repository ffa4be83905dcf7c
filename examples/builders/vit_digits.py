"""A small Vision Transformer on the 8x8 digits (Dosovitskiy et al. 2021).

The image (N, 1, 8, 8) is cut into 2x2 patches, each embedded as a 64-vector (16 tokens);
a learned [CLS] token is prepended and a learned position vector added to each of the 17
tokens; two pre-LN Transformer encoder blocks mix them; the [CLS] token's final state,
layer-normalised, goes through a Linear head to the 10 classes. 20 % of the digits are the
test set, 20 % of the rest validate; the pixels are z-scored with the training statistics.
Each block's `weights` output holds its attention maps per head (N, 4, 17, 17).

The recipe that gets past 95 % on the test digits, chosen on the validation split only:
AdamW (weight decay 0.05) under a one-cycle schedule (warm-up over 5 epochs from lr/10 to
0.003, cosine annealing to lr/1000 by epoch 50) and cross-entropy with label smoothing 0.1,
50 epochs without early stopping. Of the three recipes tried at seed 0 it reached the
best validation accuracy (0.981 at its best epoch, 0.972 at the end); the earlier one
(constant lr 0.002, early stopping on the validation loss) and that one with label
smoothing both peaked at 0.972, and tested at 0.947 and 0.944.

    python examples/builders/vit_digits.py
"""

from __future__ import annotations

from _classic import save_example, score, wire
from _networks import chain

from nodegraph.model.graph import Graph

D_MODEL = 64
EPOCHS = 50
PEAK_LR = 0.003


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
    # smoothed targets keep the logits from growing without bound on the 1150 training digits
    g.add("losses.CrossEntropy", id="loss", label_smoothing=0.1)
    g.add("optimizers.AdamW", id="opt", lr=PEAK_LR, weight_decay=0.05)
    # warm-up first (fresh attention weights take large steps badly), then a long decay
    g.add("schedules.OneCycle", id="schedule", max_lr=PEAK_LR, total_steps=EPOCHS,
          pct_start=0.1, div_factor=10.0, final_div_factor=100.0)
    wire(g, "data.x -> patches.input", "out.output -> loss.input", "data.y -> loss.target",
         "loss.loss -> opt.loss", "schedule.schedule -> opt.schedule")
    chain(g, "patches", "cls", "pos", "block1", "block2", "take", "norm", "out")
    score(g, "out", accuracy="metrics.Accuracy")
    g.update_training(epochs=EPOCHS, seed=0, device="auto")
    return g


def build() -> dict[str, Graph]:
    return {"vit_digits": build_graph()}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
