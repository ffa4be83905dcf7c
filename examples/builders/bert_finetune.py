"""Fine-tuning an imported BERT: a new head for three classes, the lower layers frozen.

What a user does with a model from Hugging Face, without the download: a small
random-config `BertForSequenceClassification` (2 layers, hidden 64, a 2-label head) goes
through `nodegraph import` (torch.export captures it; its module hierarchy becomes groups),
then, with the Graph API:

- the old head goes (`classifier`, a Linear to 2 labels) and a new Linear to 3 classes is
  wired to the pooler in its place (it starts from fresh weights; the rest from the file);
- `trainable = false` freezes the embeddings group and the first encoder layer (an instance
  inside the `bert_encoder_layer` group), so only layer 2, the pooler and the head learn;
- the example inputs become the data block: `data.TextTable` reads the review table,
  tokenises its text column with the tokenizer below and gives the token ids (x, in place
  of `input_ids`), their attention mask (mask, in place of `attention_mask`) and the
  classes (y), split into train / val / test;
- cross-entropy, Adam and accuracy against the data's labels.

The data: `data/reviews.csv`, 600 short reviews made from templates ("the hotel was not
very great overall"), labelled negative / neutral / positive by their adjective, a `not`
flipping positive and negative; `data/reviews_tokenizer.json` is a WordPiece tokenizer
(`tokenizers`) whose vocabulary is the table's words, [CLS] first, 12 ids a review (0 =
[PAD]). A user with a downloaded BERT names its tokenizer folder instead.

Running the graph needs torch only; this script needs transformers (to build the model):

    python examples/builders/bert_finetune.py
    nodegraph run examples/bert_finetune.json
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np
from _classic import wire, with_layout

EXAMPLES = Path(__file__).resolve().parents[1]
NAME = "bert_finetune"
CLASSES = ("negative", "neutral", "positive")
LENGTH = 12  # token ids per review, [CLS] and padding included
VOCAB = 128  # the most tokens the tokenizer may have: the model's vocabulary
ROWS = 600

SUBJECTS = ("the film", "this phone", "the service", "my meal", "the hotel", "the book",
            "our trip", "the game", "the concert", "this laptop", "the room", "the staff")
VERBS = ("was", "is", "felt", "seemed", "looked")
ADJECTIVES = {  # by class: the word that decides it
    0: ("awful", "terrible", "dull", "poor", "bad", "horrible", "boring", "broken"),
    1: ("average", "ordinary", "typical", "standard", "usual", "modest"),
    2: ("great", "lovely", "excellent", "wonderful", "superb", "pleasant", "brilliant",
        "good"),
}
ADVERBS = ("", "", "really", "quite", "very", "rather")
ENDINGS = ("", "", "overall", "today", "to me", "at first", "again")


def reviews(n: int = ROWS, seed: int = 0) -> list[tuple[str, int]]:
    """`n` (text, class) rows: class 0 negative, 1 neutral, 2 positive (40 / 25 / 35 %).

    The adjective decides the class; a `not` before a positive or negative one (a third of
    them) flips it, so a bag of words alone does not tell every row."""
    rng = np.random.default_rng(seed)
    rows = []
    for label in rng.choice(3, size=n, p=[0.4, 0.25, 0.35]):
        label = int(label)
        negated = label != 1 and rng.random() < 1 / 3
        word_class = 2 - label if negated else label  # "not great" is negative
        words = [rng.choice(SUBJECTS), rng.choice(VERBS), "not" if negated else "",
                 rng.choice(ADVERBS), rng.choice(ADJECTIVES[word_class]), rng.choice(ENDINGS)]
        rows.append((" ".join(w for w in words if w), label))
    return rows


def write_table(rows: list[tuple[str, int]], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(["text", "label"])
        out.writerows((text, CLASSES[label]) for text, label in rows)


def tokenizer(texts: list[str]):
    """A WordPiece tokenizer (BERT's kind) whose vocabulary is every word of `texts`, sorted,
    after [PAD] (0), [UNK] and [CLS]: each text starts with [CLS] and is padded or cut to
    LENGTH ids. (`WordPieceTrainer` would also do, but it breaks ties between pieces of
    equal count in no fixed order, and the ids would change from one run to the next.)"""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    normalizer, split = normalizers.BertNormalizer(lowercase=True), \
        pre_tokenizers.BertPreTokenizer()
    words = {w for text in texts for w, _ in split.pre_tokenize_str(
        normalizer.normalize_str(text))}
    tokens = ["[PAD]", "[UNK]", "[CLS]", *sorted(words)]
    if len(tokens) > VOCAB:
        raise ValueError(f"{len(tokens)} tokens: more than the model's {VOCAB}")
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(tokens)}, unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer, tok.decoder = normalizer, split, decoders.WordPiece()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A",
                                                       special_tokens=[("[CLS]", 2)])
    tok.enable_padding(pad_id=0, pad_token="[PAD]", length=LENGTH)
    tok.enable_truncation(LENGTH)
    return tok


def token_ids(rows: list[tuple[str, int]], tok) -> np.ndarray:
    """The rows' texts as LENGTH token ids each: the import's example input."""
    return np.array([e.ids for e in tok.encode_batch([text for text, _ in rows])], np.int64)


def bert(seed: int = 0):
    """A small random-config BERT with a 2-label head: the "downloaded" model."""
    import torch

    from nodegraph.model.packages import load_torchvision

    load_torchvision()  # transformers imports torchvision; beside a CPU torch it needs this
    import transformers

    torch.manual_seed(seed)
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=128,
                                     max_position_embeddings=32, num_labels=2)
    return transformers.BertForSequenceClassification(config).eval()


def fine_tune(g, data: str, tokenizer_file: str, classes: int) -> None:
    """The imported BERT graph `g` made a classifier of `classes` classes trained on the
    table `data` (text, label) tokenised by `tokenizer_file`: new head, frozen lower
    groups, data, loss, metric."""
    # the old head goes; a new Linear with the user's class count takes its place
    g.remove("classifier")
    g.add("layers.Linear", id="head", out_features=classes)
    g.connect(("bert_pooler", "output"), ("head", "input"))
    # freeze the embeddings and the first encoder layer (nested in the encoder's group)
    g.set_param("bert_embeddings", "trainable", False)
    g.groups["bert_encoder_layer"].body.set_param("bert_encoder_layer_0", "trainable", False)
    # the example inputs become the data: the table's reviews as token ids, mask, class
    ids_to = [e.target for e in g.edges_from("input_ids")]
    mask_to = [e.target for e in g.edges_from("attention_mask")]
    g.remove("input_ids")
    g.remove("attention_mask")
    g.add("data.TextTable", id="reviews", path=data, text="text", target="label",
          tokenizer="file", tokenizer_file=tokenizer_file, max_length=LENGTH, batch_size=32,
          shuffle=True, val_fraction=0.2, test_fraction=0.2)
    g.move_node("reviews", 0)  # the data first in the file, as the import had its inputs
    for port, targets in (("x", ids_to), ("mask", mask_to)):
        for target in targets:
            g.connect(("reviews", port), target)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.003)
    g.add("metrics.Accuracy", id="accuracy")
    wire(g, "head.output -> loss.input", "reviews.y -> loss.target", "loss.loss -> opt.loss",
         "head.output -> accuracy.input", "reviews.y -> accuracy.target")
    g.extra["imported"]["outputs"] = ["head.output"]
    g.update_training({"epochs": 30, "seed": 0})


def build(folder: Path = EXAMPLES, rows: int = ROWS):
    """Write the table and its tokenizer under folder/data, import the BERT, fine-tune
    it and save folder/bert_finetune.json (+ .safetensors); returns the graph."""
    import torch
    from safetensors.torch import load_file, save_file

    import nodegraph
    from nodegraph.interop.importing import import_graph

    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    table = reviews(rows)
    write_table(table, data / "reviews.csv")
    tok = tokenizer([text for text, _ in table])
    tok.save(str(data / "reviews_tokenizer.json"))
    ids = token_ids(table[:2], tok)
    example = (torch.from_numpy(ids), torch.from_numpy(ids != 0).long())
    path = folder / f"{NAME}.json"
    imported = import_graph(bert(), example, path, name="bert-finetune", tracer="export")
    g = imported.graph
    fine_tune(g, "data/reviews.csv", "data/reviews_tokenizer.json", len(CLASSES))
    weights = path.with_suffix(".safetensors")  # the old head's weights fit nothing now
    save_file({k: v for k, v in load_file(str(weights)).items()
               if not k.startswith("classifier.")}, str(weights))
    path.with_name(f"{path.stem}.inputs.npz").unlink()  # the example inputs: the data now
    nodegraph.save(with_layout(g), path)
    print(f"wrote {path} and {weights.name}; data/reviews.csv, data/reviews_tokenizer.json")
    return g


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else EXAMPLES)
