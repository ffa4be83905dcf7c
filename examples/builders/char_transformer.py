"""A character-level transformer language model on data.TokenText.

Token ids -> Embedding (d = 64) -> sinusoidal positions -> two pre-LN Transformer encoder
blocks with a causal mask (position t attends to 0..t only, so predicting character t + 1
cannot peek at it) -> LMHead, whose weight matrix is the Embedding's (a tie: one Parameter
scores the tokens and embeds them). Trained with cross-entropy on every position; a model
that knows nothing scores log(vocabulary size).

The language model is the group `lm` (instance `lm`); its ports are the token ids in, the
scores (`output`) and each block's attention weights (N, heads, L, L) out, for the editor's
heatmaps. procedures.Decode (`decode`) loops around it to write text; its `method` switches
greedy, temperature, top-k and beam search:

    nodegraph sample examples/char_transformer.json decode --train --set method=beam

    python examples/builders/char_transformer.py
"""

from __future__ import annotations

from _classic import save_example, wire
from _networks import chain

from nodegraph.model.graph import Graph, Tie
from nodegraph.model.groups import make_group
from nodes.data.sequences import BUNDLED_TEXT, vocabulary

VOCAB = len(vocabulary(BUNDLED_TEXT))
D_MODEL = 64
MODEL_NODES = ["embed", "pos", "block1", "block2", "head"]


def build_graph(blocks: int = 2) -> Graph:
    g = Graph("char-transformer")
    g.add("data.TokenText", id="data", seq_len=64, stride=8, batch_size=32)
    g.add("layers.Embedding", id="embed", num_embeddings=VOCAB, embedding_dim=D_MODEL)
    g.add("attention.SinusoidalPositionalEncoding", id="pos")
    for i in range(1, blocks + 1):
        g.add("attention.TransformerEncoderBlock", id=f"block{i}", nhead=4, causal=True,
              dim_feedforward=4 * D_MODEL, dropout=0.1)
    g.add("attention.LMHead", id="head", vocab_size=VOCAB)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.AdamW", id="opt", lr=0.003)
    wire(g, "data.x -> embed.input", "head.output -> loss.input", "data.y -> loss.target",
         "loss.loss -> opt.loss")
    chain(g, "embed", "pos", *[f"block{i}" for i in range(1, blocks + 1)], "head")
    make_group(g, MODEL_NODES[:2] + [f"block{i}" for i in range(1, blocks + 1)] + ["head"],
               "lm", instance="lm")
    # a tie names the flat ids of the group's inner nodes (body ties are not saved)
    g.add_tie(Tie("lm__embed", "weight", "lm__head", "weight"))
    for i in range(1, blocks + 1):  # each block's attention weights as a port of the group
        g.groups["lm"].outputs[f"weights{i}"] = (f"block{i}", "weights")
    g.add("procedures.Decode", id="decode", model="lm", prompt="The river ",
          max_new_tokens=80)
    g.update_training(epochs=30, seed=0, device="auto")
    return g


def build() -> dict[str, Graph]:
    return {"char_transformer": build_graph()}


if __name__ == "__main__":
    for file_name, graph in build().items():
        save_example(graph, file_name)
