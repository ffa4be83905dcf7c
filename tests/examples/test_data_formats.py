"""The file-format examples (examples/builders/data_formats.py) train on files that
examples/make_data.py writes, here into a temporary folder, and learn what their data
holds: each classifier far above chance (the Parquet one as well as scikit-learn's logistic
regression on the same rows), the BPE language model far below log(vocabulary).

Two run streamed with DataLoader workers (storage stream, training.workers 2): the CIFAR
CNN and the WebDataset MLP; their result must match what the data allows as the
in-memory runs do.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
import torch
from classic_support import EXAMPLES, assert_builder_writes_files, run

from nodegraph.runtime.procedure import run_procedure


def _make_data():
    spec = importlib.util.spec_from_file_location("make_data", EXAMPLES / "make_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def make_data():
    torch.set_num_threads(1)
    return _make_data()


def test_the_files_are_what_the_builder_writes():
    assert_builder_writes_files("data_formats")


def test_cifar_cnn_learns_streamed_with_workers(make_data, tmp_path):
    folder = make_data.write_cifar(tmp_path, per_batch=400, test=300)
    result = run("cifar_cnn", epochs=4, data__path=str(folder), data__storage="stream",
                 data_roots=(tmp_path,),
                 training__workers=2)
    from nodegraph.kinds.streamed import is_streamed

    assert is_streamed(result.compiled.datasets["data"])
    assert result.final["test"]["accuracy"] > 0.7  # 10 classes: chance is 0.1


def test_cifar_cnn_learns_in_memory(make_data, tmp_path):
    folder = make_data.write_cifar(tmp_path, per_batch=400, test=300)
    result = run("cifar_cnn", epochs=4, data__path=str(folder), data_roots=(tmp_path,))
    assert not getattr(result.compiled.datasets["data"], "streamed", False)
    assert result.final["test"]["accuracy"] > 0.7


def test_parquet_churn_matches_logistic_regression(make_data, tmp_path):
    from sklearn.linear_model import LogisticRegression

    path = make_data.write_parquet(tmp_path, n=3000)
    result = run("parquet_churn", epochs=10, data__path=str(path), data_roots=(tmp_path,))
    data = result.compiled.datasets["data"]
    train, test = data.tensors("train"), data.tensors("test")
    reference = LogisticRegression(max_iter=1000).fit(train["x"].numpy(), train["y"].numpy())
    baseline = reference.score(test["x"].numpy(), test["y"].numpy())
    majority = max(test["y"].float().mean().item(), 1 - test["y"].float().mean().item())
    assert result.final["test"]["accuracy"] >= baseline - 0.03
    assert result.final["test"]["accuracy"] > majority + 0.1
    assert data.categories["plan"] == {"basic": 0, "plus": 1, "pro": 2}


def test_hf_signals_learn(make_data, tmp_path):
    folder = make_data.write_hf(tmp_path, train=1200, test=300)
    result = run("hf_signals", epochs=10, data__path=str(folder), data_roots=(tmp_path,))
    assert result.final["test"]["accuracy"] > 0.8  # 4 classes: chance is 0.25


def test_webdataset_signals_learn_streamed(make_data, tmp_path):
    folder = make_data.write_shards(tmp_path, shards=4, per_shard=300, val=300)
    result = run("webdataset_signals", epochs=10, data_roots=(tmp_path,),
                 data__shards=str(folder / "train-{000..003}.tar"),
                 data__val_shards=str(folder / "val-000.tar"), data__storage="stream",
                 training__workers=2)
    assert result.final["val"]["accuracy"] > 0.8


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("corpus")
    path = _make_data().write_corpus(folder, sentences=1500)
    return run("bpe_transformer", epochs=2, data__path=str(path), data_roots=(folder,))


def test_bpe_language_model_learns(bpe):
    vocab = bpe.compiled.datasets["data"].vocab.tokenizer.get_vocab_size()
    assert vocab <= 512
    assert bpe.final["val"]["loss"] < 0.4 * math.log(vocab)


def test_bpe_decoding_writes_corpus_words(bpe):
    frames = run_procedure(bpe.compiled, "decode", method="greedy", max_new_tokens=12)
    text = frames[-1]["text"]
    assert text.startswith("The river")
    words = set(np.char.strip(np.array(text[len("The river"):].replace(".", " ").split())))
    vocabulary = set(_make_data().corpus(1500).replace(".", " ").split())
    assert words and words <= vocabulary  # whole words of the grammar, no byte soup


def test_bpe_language_model_streamed_decodes(tmp_path):
    """Streamed, the contexts are cut per sample; the model still learns and Decode reads
    the context length without materialising the split."""
    from nodegraph.kinds.streamed import is_streamed

    path = _make_data().write_corpus(tmp_path, sentences=1500)
    result = run("bpe_transformer", epochs=2, data__path=str(path), data__storage="stream",
                 data_roots=(tmp_path,),
                 training__workers=0)
    data = result.compiled.datasets["data"]
    assert is_streamed(data) and data._tensors == {}
    assert result.final["val"]["loss"] < 0.5 * math.log(data.vocab.tokenizer.get_vocab_size())
    text = run_procedure(result.compiled, "decode", max_new_tokens=8)[-1]["text"]
    assert text.startswith("The river") and data._tensors == {}


def _full_data(name: str) -> dict:
    """The `run` keywords that point example `name` at its full data, as the figures do."""
    import sys

    sys.path.insert(0, str(EXAMPLES.parent / "tools"))
    from example_runs import FULL_DATA

    return {key.replace(".", "__"): value for key, value in FULL_DATA[name].items()}


@pytest.mark.slow
@pytest.mark.parametrize(("name", "split", "metric", "least"), [
    ("cifar_cnn", "test", "accuracy", 0.85),
    ("parquet_churn", "test", "accuracy", 0.8),
    ("hf_signals", "test", "accuracy", 0.9),
    ("webdataset_signals", "val", "accuracy", 0.85),
])
def test_the_full_examples_reach_their_figures(make_data, name, split, metric, least):
    """The examples on the full data of examples/data/full/ (made by the session fixture,
    as the figures' runs read it: the files ship small samples), reach about what
    examples/README.md reports."""
    result = run(name, **_full_data(name))
    assert result.final[split][metric] > least


@pytest.mark.slow
def test_the_full_bpe_example_writes_grammatical_text(make_data):
    result = run("bpe_transformer", **_full_data("bpe_transformer"))
    assert result.final["val"]["loss"] < 0.3 * math.log(
        result.compiled.datasets["data"].vocab.tokenizer.get_vocab_size())
    text = run_procedure(result.compiled, "decode", method="greedy")[-1]["text"]
    assert set(text.replace(".", " ").split()) <= set(make_data.corpus(4000).replace(
        ".", " ").split())
