"""Models trained from files in the formats people bring: CIFAR binary, Parquet, a text
corpus under BPE, Hugging Face `datasets` on disk and WebDataset tar shards.

Each graph names its files relative to examples/, the graphs' folder: the small samples
shipped in examples/data/ (`python examples/make_data.py --sample`); `python
examples/make_data.py` writes the full-size sets into examples/data/full/ (nothing is
downloaded), and a graph's `data_hint` says so when a file it names is missing:

- cifar_cnn.json: data.CIFAR on data/cifar-10-batches-bin → a two-layer CNN (16, 32
  channels) → 10 classes;
- parquet_churn.json: data.Parquet on data/customers.parquet (numbers and the text columns
  plan and region, numbered) → MLP → churn yes/no;
- bpe_transformer.json: data.TokenizedText trains a byte-level BPE tokenizer (vocabulary up
  to 512) on data/corpus.txt → the causal transformer of char_transformer.json on BPE
  tokens; procedures.Decode writes text with the same tokenizer;
- hf_signals.json: data.HFDataset on data/signals_hf (a DatasetDict: train, test) → MLP;
- webdataset_signals.json: data.WebDataset on data/signals_wds/train-{000..007}.tar, the
  validation split from val-000.tar → the same MLP.

    python examples/make_data.py && python examples/builders/data_formats.py
"""

from __future__ import annotations

from _classic import save_all, score, wire
from _networks import chain

from nodegraph.model.graph import Graph, Tie
from nodegraph.model.groups import make_group

BPE_VOCAB = 512
D_MODEL = 64


def _classifier(g: Graph, sizes: list[int], classes: int, lr: float) -> None:
    """An MLP `fc1 … out` from data.x to `classes` scores, cross-entropy, Adam, accuracy."""
    names = []
    for i, width in enumerate(sizes, 1):
        g.add("layers.Linear", id=f"fc{i}", out_features=width)
        g.add("activations.ReLU", id=f"relu{i}")
        names += [f"fc{i}", f"relu{i}"]
    g.add("layers.Linear", id="out", out_features=classes)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=lr)
    wire(g, f"data.x -> {names[0]}.input", "out.output -> loss.input",
         "data.y -> loss.target", "loss.loss -> opt.loss")
    chain(g, *names, "out")
    score(g, "out", accuracy="metrics.Accuracy")


def cifar_cnn() -> Graph:
    g = Graph("cifar-cnn")
    g.add("data.CIFAR", id="data", path="data/cifar-10-batches-bin", batch_size=64,
          val_fraction=0.1)
    g.add("layers.Conv2d", id="conv1", out_channels=16, kernel_size=3, padding=1)
    g.add("activations.ReLU", id="relu1")
    g.add("layers.MaxPool2d", id="pool1", kernel_size=2)
    g.add("layers.Conv2d", id="conv2", out_channels=32, kernel_size=3, padding=1)
    g.add("activations.ReLU", id="relu2")
    g.add("layers.MaxPool2d", id="pool2", kernel_size=4)
    g.add("layers.Flatten", id="flat")
    g.add("layers.Linear", id="out", out_features=10)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.003)
    wire(g, "data.x -> conv1.input", "out.output -> loss.input", "data.y -> loss.target",
         "loss.loss -> opt.loss")
    chain(g, "conv1", "relu1", "pool1", "conv2", "relu2", "pool2", "flat", "out")
    score(g, "out", accuracy="metrics.Accuracy")
    g.update_training(epochs=5, seed=0, device="auto")
    return g


def parquet_churn() -> Graph:
    g = Graph("parquet-churn")
    g.add("data.Parquet", id="data", path="data/customers.parquet", targets=["churn"],
          target_kind="class", normalize="zscore", val_fraction=0.15, test_fraction=0.15,
          batch_size=64)
    _classifier(g, [32], 2, 0.01)
    g.update_training(epochs=20, seed=0, device="auto")
    return g


def bpe_transformer(blocks: int = 2) -> Graph:
    g = Graph("bpe-transformer")
    g.add("data.TokenizedText", id="data", path="data/corpus.txt", tokenizer="bpe",
          vocab_size=BPE_VOCAB, seq_len=32, stride=16, batch_size=32)
    g.add("layers.Embedding", id="embed", num_embeddings=BPE_VOCAB, embedding_dim=D_MODEL)
    g.add("attention.SinusoidalPositionalEncoding", id="pos")
    for i in range(1, blocks + 1):
        g.add("attention.TransformerEncoderBlock", id=f"block{i}", nhead=4, causal=True,
              dim_feedforward=4 * D_MODEL, dropout=0.1)
    g.add("attention.LMHead", id="head", vocab_size=BPE_VOCAB)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.AdamW", id="opt", lr=0.003)
    body = [f"block{i}" for i in range(1, blocks + 1)]
    wire(g, "data.x -> embed.input", "head.output -> loss.input", "data.y -> loss.target",
         "loss.loss -> opt.loss")
    chain(g, "embed", "pos", *body, "head")
    make_group(g, ["embed", "pos", *body, "head"], "lm", instance="lm")
    g.add_tie(Tie("lm__embed", "weight", "lm__head", "weight"))
    g.add("procedures.Decode", id="decode", model="lm", prompt="The river",
          max_new_tokens=30)
    g.update_training(epochs=4, seed=0, device="auto")
    return g


def hf_signals() -> Graph:
    g = Graph("hf-signals")
    g.add("data.HFDataset", id="data", path="data/signals_hf", inputs=["signal"],
          targets=["label"], batch_size=64)
    _classifier(g, [64], 4, 0.01)
    g.update_training(epochs=15, seed=0, device="auto")
    return g


def webdataset_signals() -> Graph:
    g = Graph("webdataset-signals")
    g.add("data.WebDataset", id="data", shards="data/signals_wds/train-{000..007}.tar",
          val_shards="data/signals_wds/val-000.tar", batch_size=64)
    _classifier(g, [64], 4, 0.01)
    g.update_training(epochs=15, seed=0, device="auto")
    return g


DATA_HINT = ("python examples/make_data.py writes this example's data (full size, into "
             "examples/data/full/; with --sample the small samples of examples/data/)")


def build() -> dict[str, Graph]:
    graphs = {"cifar_cnn": cifar_cnn(), "parquet_churn": parquet_churn(),
              "bpe_transformer": bpe_transformer(), "hf_signals": hf_signals(),
              "webdataset_signals": webdataset_signals()}
    for g in graphs.values():
        g.extra["data_hint"] = DATA_HINT  # shown when a data file is missing, never run
    return graphs


if __name__ == "__main__":
    save_all(build())
