"""cnn_digits*.json: the CNN of seed 004 §1.3.5 has the notes' 34,826 trainable parameters
in each optimizer's file, and learns the 28x28 digits: a few epochs of the Adam file reach
90 % test accuracy (the full run's figure is in examples/README.md)."""

from __future__ import annotations

import json

import pytest
from classic_support import EXAMPLES, example

import nodegraph
from nodegraph.cli.main import main

FILES = ["cnn_digits", "cnn_digits_sgd", "cnn_digits_adadelta"]


@pytest.mark.parametrize("name", FILES)
def test_the_notes_parameter_count(name, capsys):
    report = nodegraph.validate(example(name), for_training=True)
    assert report.ok, report.problems
    assert report.shape("flat", "output")[1:] == (1600,)  # 64 maps of 5x5
    assert {n: c for n, c in report.param_counts.items() if c} == {
        "conv1": 320, "conv2": 18_496, "out": 16_010}
    assert main(["info", str(EXAMPLES / f"{name}.json")]) == 0
    assert "trainable parameters: 34,826" in capsys.readouterr().out


def test_the_three_files_differ_only_in_the_optimizer_and_its_schedule():
    """The optimizer comparison is fair: same data, batches, epochs and early stopping."""
    docs = {name: json.loads((EXAMPLES / f"{name}.json").read_text()) for name in FILES}
    adam = docs["cnn_digits"]
    assert adam["nodes"]["data"]["params"]["batch_size"] == 32
    assert adam["training"] == {"epochs": 60, "seed": 0, "device": "auto", "patience": 10,
                                "monitor": "val.loss"}
    for doc in docs.values():
        assert doc["training"] == adam["training"]
        assert {k: v for k, v in doc["nodes"].items() if k not in ("opt", "schedule")} == \
            {k: v for k, v in adam["nodes"].items() if k != "opt"}
    assert [d["nodes"]["opt"]["type"] for d in docs.values()] == [
        "optimizers.Adam", "optimizers.SGD", "optimizers.Adadelta"]


def test_a_few_epochs_learn_the_digits():
    result = nodegraph.train(example("cnn_digits"), epochs=4)
    assert result.final["test"]["accuracy"] >= 0.9
    assert result.history[-1]["train"]["loss"] < result.history[0]["train"]["loss"] / 3
