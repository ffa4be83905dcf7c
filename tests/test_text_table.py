"""data.TextTable: a table's text column as token ids, checked against the tokenizers library's
own encoding; labels numbered as data.Parquet numbers them; the trained tokenizer sees only
the training split; validation's description equals what is built; errors name the column
or file."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import nodegraph
from nodegraph.kinds import footprint
from nodegraph.kinds.datameta import DataMeta
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import default_registry

pytest.importorskip("tokenizers")

WORDS = ("good", "bad", "fine", "great", "awful", "okay")
LABELS = {"good": "pos", "great": "pos", "bad": "neg", "awful": "neg", "fine": "mid",
          "okay": "mid"}


def _rows(n: int = 60, seed: int = 0) -> list[tuple[str, str]]:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        word = str(rng.choice(WORDS))
        filler = " ".join(["the", "food", "was"][: int(rng.integers(1, 4))])
        rows.append((f"{filler} {word}", LABELS[word]))
    return rows


def _csv(path: Path, rows, header=("text", "label")) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(header)
        out.writerows(rows)
    return path


def _tokenizer(rows, path: Path, pad: str = "[PAD]") -> Path:
    """A WordPiece tokenizer of the rows' words, [CLS] first, as a user brings one."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    words = sorted({w for text, _ in rows for w in text.split()})
    vocab = {t: i for i, t in enumerate([pad, "[UNK]", "[CLS]", "[SEP]", *words])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.save(str(path))
    return path


def _build(**params):
    spec = default_registry().get("data.TextTable")
    resolved, problems = spec.resolve_params(params)
    assert not problems, problems
    return spec, resolved


def _all(dataset, port: str) -> torch.Tensor:
    """Port `port` of every row, in the table's order (the splits put back)."""
    n = sum(len(r) for r in dataset.rows.values())
    first = dataset.tensors(next(iter(dataset.rows)))[port]
    out = torch.empty((n, *first.shape[1:]), dtype=first.dtype)
    for split, rows in dataset.rows.items():
        out[rows] = dataset.tensors(split)[port]
    return out


def test_ids_and_mask_are_the_tokenizers_own_padded_and_cut(tmp_path):
    from tokenizers import Tokenizer

    rows = _rows() + [("the food was good and the service was great too", "pos")]
    table = _csv(tmp_path / "t.csv", rows)
    tok_file = _tokenizer(rows, tmp_path / "tok.json")
    spec, p = _build(path=str(table), tokenizer="file", tokenizer_file=str(tok_file),
                     max_length=6)
    dataset = spec.build(p)
    reference = Tokenizer.from_file(str(tok_file))
    reference.enable_truncation(6)
    reference.enable_padding(pad_id=0, pad_token="[PAD]", length=6)
    encoded = reference.encode_batch([text for text, _ in rows])
    assert torch.equal(_all(dataset, "x"), torch.tensor([e.ids for e in encoded]))
    assert torch.equal(_all(dataset, "mask"), torch.tensor([e.attention_mask for e in encoded]))
    assert _all(dataset, "x")[-1, -1] == 3  # the long review is cut, its [SEP] kept
    classes = sorted(set(LABELS.values()))  # text labels numbered in sorted order
    assert _all(dataset, "y").tolist() == [classes.index(label) for _, label in rows]


def test_a_save_pretrained_folder_and_its_pad_token_are_used(tmp_path):
    rows = _rows()
    folder = tmp_path / "bert-tokenizer"
    folder.mkdir()
    _tokenizer(rows, folder / "tokenizer.json", pad="<pad>")
    spec, p = _build(path=str(_csv(tmp_path / "t.csv", rows)), tokenizer="file",
                     tokenizer_file=str(folder), max_length=8)
    x, mask = _all(spec.build(p), "x"), _all(spec.build(p), "mask")
    assert torch.equal(x[mask == 0], torch.zeros(int((mask == 0).sum()), dtype=torch.long))
    assert (x[:, 0] == 2).all()  # [CLS] first


def test_the_trained_tokenizer_never_sees_a_validation_or_test_text(tmp_path):
    rows = _rows(80)
    spec, p = _build(path=str(_csv(tmp_path / "t.csv", rows)), tokenizer="wordpiece",
                     vocab_size=200, val_fraction=0.25, test_fraction=0.25, max_length=8)
    target = int(spec.build(p).rows["test"][0])
    rare = "zyzzyva"  # put into one test row only: it must not become a token
    rows[target] = (f"{rows[target][0]} {rare}", rows[target][1])
    spec, p = _build(path=str(_csv(tmp_path / "t2.csv", rows)), tokenizer="wordpiece",
                     vocab_size=200, val_fraction=0.25, test_fraction=0.25, max_length=8)
    vocab = spec.build(p).vocab.tokenizer.get_vocab()
    assert rare not in vocab and "food" in vocab
    rows[target] = (rows[target][0], rows[target][1])
    spec, p = _build(path=str(_csv(tmp_path / "t3.csv", [*rows, (f"the {rare}", "pos")])),
                     tokenizer="wordpiece", vocab_size=200, val_fraction=0.0,
                     test_fraction=0.0, max_length=8)
    assert rare in spec.build(p).vocab.tokenizer.get_vocab()  # in training, it is learned
    assert vocab["[PAD]"] == 0


@pytest.mark.parametrize(("block", "given"), [
    ("data.TextTable", {"vocab_size": 30}),
    ("data.TokenizedText", {"tokenizer": "wordpiece", "vocab_size": 30, "min_frequency": 1}),
])
def test_the_trained_vocabulary_is_the_same_in_every_process(tmp_path, block, given):
    """A resumed run or a loaded model numbers the tokens as the first process did (the
    tokenizers library's WordPiece trainer breaks ties in no fixed order across
    processes: three runs gave three vocabularies)."""
    import subprocess
    import sys

    table = _csv(tmp_path / "t.csv", _rows(200))
    script = ("import json, sys; from nodegraph.model.spec import default_registry as r; "
              f"s = r().get({block!r}); "
              f"p, _ = s.resolve_params({{'path': sys.argv[1], **{given!r}}}); "
              "print(json.dumps(sorted(s.build(p).vocab.tokenizer.get_vocab().items())))")
    seen = {subprocess.run([sys.executable, "-c", script, str(table)], capture_output=True,
                           text=True, check=True, timeout=300,
                           env={"PYTHONHASHSEED": str(seed), "PATH": "/usr/bin:/bin",
                                "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
                           ).stdout for seed in (1, 2, 3)}
    assert len(seen) == 1
    vocab = dict(json.loads(seen.pop()))
    assert len(vocab) == 30 and "[UNK]" in vocab


def test_number_labels_and_values(tmp_path):
    rows = [(f"word{i % 4} more", i % 3) for i in range(30)]
    spec, p = _build(path=str(_csv(tmp_path / "t.csv", rows)), max_length=5,
                     vocab_size=40)
    assert _all(spec.build(p), "y").tolist() == [i % 3 for i in range(30)]
    spec, p = _build(path=str(_csv(tmp_path / "v.csv", [(t, y / 2) for t, y in rows])),
                     target_kind="value", max_length=5, vocab_size=40)
    y = _all(spec.build(p), "y")
    assert y.shape == (30, 1) and y.dtype == torch.float32
    assert y[:, 0].tolist() == [(i % 3) / 2 for i in range(30)]


@pytest.mark.parametrize("given", [
    {}, {"split": "stratified"}, {"val_fraction": 0.0, "test_fraction": 0.0},
    {"batch_size": 7, "test_fraction": 0.3}, {"folds": 3, "fold": 1},
])
def test_validation_describes_what_is_built(tmp_path, given):
    spec, p = _build(path=str(_csv(tmp_path / "t.csv", _rows())), max_length=7,
                     vocab_size=40, **given)
    meta, built = spec.meta(p), spec.build(p)
    if given.get("split") == "stratified":
        assert meta is None  # its sizes follow the labels: validation builds it
        return
    assert meta == DataMeta.of(built)
    assert meta.nbytes == footprint.dataset_bytes(built)
    assert meta.classes == {"y": 3}


def _texts_to_embeddings(folder: Path) -> nodegraph.Graph:
    """300 reviews in folder/reviews.csv, read as 6 token ids each into an Embedding."""
    g = nodegraph.Graph("texts")
    g.folder = folder
    _csv(folder / "reviews.csv", _rows(300))
    g.add("data.TextTable", id="data", path="reviews.csv", max_length=6, vocab_size=100,
          split="stratified", batch_size=16)
    g.add("layers.Embedding", id="embed", num_embeddings=100, embedding_dim=16)
    g.connect(("data", "x"), ("embed", "input"))
    return g


def test_a_graph_trains_on_it(tmp_path):
    """Embedding → mean over the tokens → Linear: the word decides the class, so a few
    epochs take the validation accuracy well past the majority class (a vocabulary too
    small for whole words would cut the deciding word off at max_length)."""
    g = _texts_to_embeddings(tmp_path)
    g.add("opaque.Function", id="mean", function="torch:mean", args=[{"input": 0}, 1],
          kwargs={})
    g.add("layers.Linear", id="head", out_features=3)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.03)
    g.add("metrics.Accuracy", id="acc")
    for src, dst in (("embed.output", "mean.input"),
                     ("mean.output", "head.input"), ("head.output", "loss.input"),
                     ("data.y", "loss.target"), ("loss.loss", "opt.loss"),
                     ("head.output", "acc.input"), ("data.y", "acc.target")):
        g.connect(tuple(src.split(".")), tuple(dst.split(".")))
    g.update_training({"epochs": 15, "seed": 0, "device": "cpu"})
    report = nodegraph.validate(g, for_training=True)
    assert report.ok, report.problems
    assert report.shape("data", "x") == (16, 6)
    model = nodegraph.fit(g)
    assert model.history[-1]["val"]["acc"] >= 0.9  # majority class: 1/3


@pytest.mark.parametrize(("given", "says"), [
    ({"text": "review"}, "has no column 'review' (columns: text, label)"),
    ({"target": "text"}, "column 'text' is both the text and the target"),
    ({"target_kind": "value"}, "target column 'label' holds text; use target_kind 'class'"),
    ({"tokenizer": "file", "tokenizer_file": "{nope.json}"}, "tokenizer file"),
])
def test_errors_name_the_column_or_file(tmp_path, given, says):
    table = _csv(tmp_path / "t.csv", _rows())
    given = {k: str(tmp_path / v[1:-1]) if isinstance(v, str) and v.startswith("{") else v
             for k, v in given.items()}
    spec, p = _build(path=str(table), **given)
    with pytest.raises(NodegraphError, match=re.escape(says)):
        spec.meta(p) if "tokenizer_file" not in given else spec.build(p)


def test_text_column_of_numbers_and_missing_texts_are_refused(tmp_path):
    spec, p = _build(path=str(_csv(tmp_path / "n.csv", [(1, "a"), (2, "b")])))
    with pytest.raises(NodegraphError, match="text column 'text' holds int64, not text"):
        spec.meta(p)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["fine", None, None], "label": ["a", "b", "a"]}),
                   tmp_path / "m.parquet")
    spec, p = _build(path=str(tmp_path / "m.parquet"))
    with pytest.raises(NodegraphError, match="column 'text' has missing values .null. in 2 rows"):
        spec.build(p)


def test_a_trained_model_predicts_on_texts(tmp_path):
    """`predict(["a new review", ...])`: the texts tokenized as the block tokenized its
    table, into every port the model reads (ids and mask), before and after a save."""
    g = _texts_to_embeddings(tmp_path)
    g.add("opaque.Function", id="masked", function="torch:mul",
          args=[{"input": 0}, {"input": 1}], kwargs={})
    g.add("opaque.Function", id="mask3", function="torch:unsqueeze", args=[{"input": 0}, -1],
          kwargs={})
    g.add("opaque.Function", id="mean", function="torch:mean", args=[{"input": 0}, 1],
          kwargs={})
    g.add("layers.Linear", id="head", out_features=3)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=0.03)
    for src, dst in (("data.mask", "mask3.input"),
                     ("embed.output", "masked.input"), ("mask3.output", "masked.input_2"),
                     ("masked.output", "mean.input"), ("mean.output", "head.input"),
                     ("head.output", "loss.input"), ("data.y", "loss.target"),
                     ("loss.loss", "opt.loss")):
        g.connect(tuple(src.split(".")), tuple(dst.split(".")))
    g.update_training({"epochs": 15, "seed": 0, "device": "cpu"})
    model = nodegraph.fit(g)
    texts = ["the food was great", "awful", "The food was OKAY"]
    got = model.predict(texts)
    assert got.argmax(1).tolist() == [2, 1, 0]  # classes sorted: mid 0, neg 1, pos 2
    ids, mask = (model.compiled.datasets["data"].raw_inputs[p].array(texts, "data." + p)
                 for p in ("x", "mask"))
    assert torch.equal(got, model.predict({"data.x": ids, "data.mask": mask}))
    assert torch.allclose(model.predict("awful"), got[1:2], atol=1e-6)  # one text
    model.save(tmp_path / "m.ngz")
    assert torch.equal(nodegraph.load_model(tmp_path / "m.ngz").predict(texts), got)
    from nodegraph.runtime import preprocess

    steps = preprocess.preprocessors(model.compiled)  # what an ONNX file's metadata says
    said = {p: preprocess.contract(model.compiled, ("data", p), steps[("data", p)])["range"]
            for p in ("x", "mask")}
    assert said["x"].startswith("token ids of the data block's tokenizer")
    assert said["mask"].startswith("the data block's attention mask")
    with pytest.raises(NodegraphError, match=r"reads 2 data ports \(data.x, data.mask\)"):
        model.predict(["fine", 3])  # not texts: the ports must be given by name
