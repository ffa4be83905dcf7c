"""An optimizer's lr edited while the editor trains goes to the run (no "stop the run?"
question), applies from its next step and is in the run's history."""

from __future__ import annotations

from tests.gui.test_training import wait_until


def test_lr_edited_while_training_reaches_the_run(xor_window, prompts):
    w = xor_window
    w.epochs.setValue(100_000)  # one step an epoch: a long run of short epochs
    assert w.start_training()
    assert wait_until(lambda: w.run_status.done_steps > 5, timeout=120)
    assert w.doc.set_param("opt", "lr", 0.2)
    assert "stop_run" not in prompts.kinds() and w.runner.running
    assert w.doc.graph.node("opt").params["lr"] == 0.2  # the file has it too (undoable)
    began = w.run_status.done_steps
    assert wait_until(lambda: w.run_status.done_steps > began + 5, timeout=120)
    w.runner.stop()
    assert w.runner.wait(30)
    history = w.runner.result.history
    changed = [h for h in history if "changes" in h]
    assert len(changed) == 1 and changed[0]["changes"][0]["value"] == 0.2
    assert history[-1]["lr"]["opt"] == 0.2 and history[0]["lr"]["opt"] == 0.05
    # any other param still asks first
    prompts.stop_run = "cancel"
    assert w.start_training()
    assert wait_until(lambda: w.runner.running, timeout=60)
    assert not w.doc.set_param("hidden", "out_features", 6)
    assert "stop_run" in prompts.kinds()
