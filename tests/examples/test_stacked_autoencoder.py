"""examples/stacked_autoencoder*.json: greedy layer-wise pre-training, then fine-tuning.

Seed 004 Table 2 (E17): after pre-training, fine-tuning the whole stack end to end beats
a classifier on frozen pre-trained encoders. Quick mode shortens the three stages; the
frozen run must keep both autoencoders exactly fixed while its head learns, the
fine-tuned run must move them, and the reported accuracy must be the one the trained
weights give when the stack is written out by hand.
"""

from __future__ import annotations

import pytest
import torch
from classic_support import assert_builder_writes_files, example

import nodegraph

QUICK = (6, 6, 8)  # epochs of pretrain1, pretrain2, finetune


def quick(name: str):
    g = example(name)
    for stage, epochs in zip(g.training["stages"], QUICK, strict=True):
        stage["epochs"] = epochs
    return nodegraph.train(g, device="cpu")


@pytest.fixture(scope="module")
def finetuned():
    return quick("stacked_autoencoder")


@pytest.fixture(scope="module")
def frozen():
    return quick("stacked_autoencoder_frozen")


def stage_entries(result, name):
    return [h for h in result.history if h["stage"] == name]


def test_fine_tuning_beats_frozen_encoders(finetuned, frozen):
    tuned, fixed = finetuned.final["test"]["accuracy"], frozen.final["test"]["accuracy"]
    assert tuned > fixed + 0.04, (tuned, fixed)
    assert tuned > 0.9
    # before the head trains, both are at chance (the notes' "pre-trained" row, ≈ 0.1)
    for result in (finetuned, frozen):
        assert stage_entries(result, "pretrain2")[-1]["train"]["accuracy"] < 0.25


def test_stages_train_what_they_name(finetuned, frozen):
    assert [len(stage_entries(finetuned, s)) for s in ("pretrain1", "pretrain2",
                                                       "finetune")] == list(QUICK)
    for result in (finetuned, frozen):  # each pre-training stage lowers its own loss
        first, second = stage_entries(result, "pretrain1"), stage_entries(result, "pretrain2")
        assert first[-1]["train"]["loss1"] < 0.5 * first[0]["train"]["loss1"]
        assert second[-1]["train"]["loss2"] < 0.5 * second[0]["train"]["loss2"]
        # enc1 is frozen in stage 2: its reconstruction loss does not move
        assert {round(h["train"]["loss1"], 6) for h in second} == {
            round(second[0]["train"]["loss1"], 6)}
    fixed = stage_entries(frozen, "finetune")
    for key in ("loss1", "loss2"):  # frozen encoders: both reconstructions stay put
        assert fixed[-1]["train"][key] == pytest.approx(fixed[0]["train"][key], rel=1e-5)
    tuned = stage_entries(finetuned, "finetune")  # fine-tuning moves the first encoder
    assert tuned[-1]["train"]["loss1"] > 1.2 * tuned[0]["train"]["loss1"]


def test_accuracy_is_that_of_the_stack_written_out(finetuned):
    blocks = finetuned.module.blocks
    data = finetuned.compiled.datasets["data"].tensors("test")
    with torch.no_grad():
        h1 = torch.sigmoid(blocks["enc1"](data["x"]))
        logits = blocks["head"](torch.sigmoid(blocks["enc2"](h1)))
    accuracy = (logits.argmax(1) == data["y"]).float().mean().item()
    assert finetuned.final["test"]["accuracy"] == pytest.approx(accuracy, abs=1e-6)


def test_the_files_are_what_the_builder_writes():
    assert_builder_writes_files("stacked_autoencoder")
