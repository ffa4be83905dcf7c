"""File > Save Trained Model: the editor's last run becomes a `.ngz` that
`nodegraph.load_model` reads, and `nodegraph run --save-model` writes the same kind."""

from __future__ import annotations

import torch

import nodegraph


def test_the_last_run_saves_as_a_model_that_predicts_as_the_editor_trained_it(
        xor_window, prompts, tmp_path):
    w = xor_window
    prompts.model_to = str(tmp_path / "xor_model")  # no suffix: .ngz is added
    w.actions_by_name["save_model"].trigger()  # nothing trained yet: said, nothing written
    assert prompts.kinds()[-1] == "error" and not list(tmp_path.glob("*.ngz"))
    w.epochs.setValue(60)
    w.actions_by_name["train"].trigger()
    assert w.runner.wait(180)
    w.actions_by_name["save_model"].trigger()
    model = nodegraph.load_model(tmp_path / "xor_model.ngz")
    assert model.epochs == 60
    x = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    trained = w.runner.result.compiled
    expected = nodegraph.forward(w.runner.graph, {"data.x": x}, compiled=trained)["out", "output"]
    assert torch.equal(model.predict(x), expected)
