"""Training from the editor: in its own process, live plots, Stop mid-epoch, pause, edits
during a run, a training process that dies."""

from __future__ import annotations

import time

from PySide6.QtCore import QCoreApplication, QPointF, QTimer

import nodegraph
from nodegraph.model.events import EpochEnded, RunFinished, RunStarted, StepEnded
from nodegraph.model.fileformat import save
from nodegraph.model.graph import Graph


def wait_until(predicate, timeout: float = 60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        QCoreApplication.processEvents()
        time.sleep(0.002)
    return False


def slow_graph(path) -> str:
    """A regression with 20,000 one-sample steps per epoch: a run worth stopping."""
    g = Graph("slow")
    g.add("data.NoisyLine", "data", n=25_000, batch_size=1, val_fraction=0.2)
    g.add("layers.Linear", "line", out_features=1)
    g.add("losses.MSE", "loss")
    g.add("optimizers.SGD", "opt", lr=0.01)
    g.connect(("data", "x"), ("line", "input"))
    g.connect(("line", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.set_training("epochs", 50)
    save(g, path)
    return str(path)


def test_training_fills_the_plots_status_and_log(xor_window):
    w = xor_window
    finished = []
    w.runner.listen(lambda e: finished.append(e) if isinstance(e, RunFinished) else None)
    w.epochs.setValue(40)
    w.actions_by_name["train"].trigger()
    assert not w.actions_by_name["train"].isEnabled() and w.actions_by_name["stop"].isEnabled()
    assert w.runner.wait(180)
    w.plots.redraw()
    assert w.plots.points("train loss") == 40
    assert w.plots.points("train accuracy") == 40  # the metric goes to the metrics plot
    assert w.plots.points("train loss (step)") >= 4
    xs, ys = w.plots.series["train loss"]
    assert xs == list(range(1, 41)) and ys[-1] < ys[0]
    assert "finished after 40 epoch(s)" in w.run_status.text
    assert finished and not finished[0].cancelled
    assert any("epoch 40/40" in line for line in w.log.lines)
    w.log.flush()  # the widget gets its lines a few times a second, and shows the newest
    assert "finished after 40 epoch(s)" in w.log.toPlainText().splitlines()[-1]
    bar = w.log.verticalScrollBar()
    assert bar.value() == bar.maximum()
    assert w.actions_by_name["train"].isEnabled() and not w.actions_by_name["stop"].isEnabled()


def test_stop_works_mid_epoch_within_a_second_and_the_canvas_stays_live(make_window, tmp_path):
    w = make_window(slow_graph(tmp_path / "slow.json"))
    finished = []
    w.runner.listen(lambda e: finished.append(e) if isinstance(e, RunFinished) else None)
    assert w.start_training()
    assert wait_until(lambda: w.run_status.done_steps > 200)
    ticks = []
    timer = QTimer(interval=20)
    timer.timeout.connect(lambda: ticks.append(time.monotonic()))
    timer.start()
    wait_until(lambda: False, timeout=0.6)  # the GUI thread keeps serving events
    timer.stop()
    assert len(ticks) >= 8  # of 30: generous, the interpreter lock is shared with training
    w.actions_by_name["pause"].trigger()
    assert w.runner.paused
    wait_until(lambda: False, timeout=0.3)  # steps taken before the pause still arrive
    paused_at = w.run_status.done_steps
    wait_until(lambda: False, timeout=0.4)
    assert w.run_status.done_steps == paused_at  # none while paused
    w.actions_by_name["pause"].trigger()
    assert not w.runner.paused
    began = time.monotonic()
    w.actions_by_name["stop"].trigger()
    assert w.runner.wait(5)
    assert time.monotonic() - began < 1.0
    assert finished and finished[0].cancelled and finished[0].history == []  # mid-epoch
    assert w.plots.points("train loss (step)") > 0  # the plots are kept
    # Stop finishes cleanly: the progress bar is reset and no wave is left on the wires
    assert w.run_status.bar.value() == 0 and "stopped" in w.run_status.label.text()
    assert w.watch.animator.frame is None
    assert all(s.color is None for s in w.watch.marks._strokes.values())


def test_editing_during_a_run_asks_whether_to_stop(make_window, tmp_path, prompts):
    w = make_window(slow_graph(tmp_path / "slow.json"))
    w.start_training()
    assert wait_until(lambda: w.run_status.done_steps > 0)
    prompts.stop_run = "cancel"
    assert w.edit_actions.add_block("activations.ReLU", QPointF(0, 300)) is None
    assert "relu" not in w.doc.graph.nodes and w.runner.running
    prompts.stop_run = "stop"
    assert w.edit_actions.add_block("activations.ReLU", QPointF(0, 300)) == "relu"
    assert not w.runner.running and prompts.kinds() == ["stop_run", "stop_run"]


def test_a_graph_with_errors_is_not_trained(window):
    window.edit_actions.add_block("layers.Linear", QPointF(0, 0))
    assert not window.start_training()
    assert not window.runner.running
    assert window.problems.problems  # the reasons are listed


def test_a_run_that_fails_paints_the_node_and_logs_why(make_window, tmp_path):
    g = Graph("diverges")
    g.add("data.NoisyLine", "data", n=64, batch_size=8)
    g.add("layers.Linear", "line", out_features=1)
    g.add("losses.MSE", "loss")
    g.add("optimizers.SGD", "opt", lr=1e6)  # explodes to inf, then NaN
    g.connect(("data", "x"), ("line", "input"))
    g.connect(("line", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.set_training("epochs", 50)
    save(g, tmp_path / "diverges.json")
    w = make_window(str(tmp_path / "diverges.json"))
    assert w.start_training()
    assert w.runner.wait(180)
    failed = [n for n, item in w.scene.nodes.items()
              if any(p.kind == "runtime_error" for p in item.problems)]
    assert len(failed) == 1 and w.scene.nodes[failed[0]].has_error
    assert "NaN or infinite" in w.scene.nodes[failed[0]].toolTip()
    assert any("NaN or infinite" in line for line in w.log.lines)
    assert w.scene.selected_node_ids() == failed


def test_train_and_val_curves_are_plotted_side_by_side(make_window, tmp_path):
    g = Graph("line")
    g.add("data.NoisyLine", "data", n=80, batch_size=16, val_fraction=0.25)
    g.add("layers.Linear", "line", out_features=1)
    g.add("losses.MSE", "loss")
    g.add("optimizers.SGD", "opt", lr=0.1)
    g.connect(("data", "x"), ("line", "input"))
    g.connect(("line", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    save(g, tmp_path / "line.json")
    w = make_window(str(tmp_path / "line.json"))
    w.epochs.setValue(3)
    assert w.start_training() and w.runner.wait(180)
    assert w.plots.points("train loss") == w.plots.points("val loss") == 3
    assert w.plots.points("train accuracy") == 0  # no metric block, no metric curve
    assert any("| val loss" in line for line in w.log.lines)


def test_axes_hold_still_during_a_run_and_fit_at_its_end(xor_window):
    w = xor_window
    plots = w.plots
    w.runner.deliver([RunStarted(100, 5, 1, "cpu", 10)])
    for epoch, loss in ((1, 0.83), (2, 0.61)):
        w.runner.deliver([StepEnded(epoch, 5, 5, loss), EpochEnded(
            epoch, 100, {"loss": loss}, {}, {}, 0.01)])
    plots.redraw()
    x0, x1 = plots.loss_plot.vb.viewRange()[0]
    assert x0 < 1 < 100 < x1 < 103  # the whole run's epochs from the start
    assert plots.step_plot.vb.viewRange()[0][1] > 500
    y0, y1 = plots.loss_plot.vb.viewRange()[1]
    assert y0 < 0.6 and 0.9 < y1 < 1.0  # 0.61..0.83 rounded out to 0.6..0.9
    w.runner.deliver([StepEnded(3, 5, 5, 0.7), EpochEnded(3, 100, {"loss": 0.7}, {}, {}, 0.1)])
    plots.redraw()
    assert plots.loss_plot.vb.viewRange()[1] == [y0, y1]  # inside the range: no move
    w.runner.deliver([EpochEnded(4, 100, {"loss": 1.4}, {}, {}, 0.1)])
    plots.redraw()
    assert plots.loss_plot.vb.viewRange()[1][1] > 1.4  # a value outside widens it
    plots.step_plot.vb.sigRangeChangedManually.emit([True, True])  # a person zooms
    assert plots.step_plot not in plots._held and plots.loss_plot in plots._held
    w.runner.deliver([RunFinished([], {})])
    assert not plots._held and plots.loss_plot.vb.autoRangeEnabled()[0]


def test_runs_train_in_a_process_of_their_own_and_survive_its_end(make_window, tmp_path):
    from nodegraph.gui.training.runner import _ProcessWorker
    from nodegraph.runtime import train_process

    w = make_window(slow_graph(tmp_path / "slow.json"))
    assert train_process.wait_ready()  # until it is warm, a run trains in a thread
    assert w.start_training()
    assert w.run_status.text == "starting the run…" and w.run_status.bar.maximum() == 0
    worker = w.runner._worker
    assert isinstance(worker, _ProcessWorker)
    assert wait_until(lambda: w.run_status.done_steps > 100)
    worker.process.kill()  # as if it crashed or ran out of memory
    assert w.runner.wait(10)
    assert any("training process ended unexpectedly" in line for line in w.log.lines)
    assert w.runner.result is None and w.actions_by_name["train"].isEnabled()
    w.epochs.setValue(1)
    w.doc.graph.set_param("data", "n", 200)
    assert w.start_training()  # a new process takes over
    assert w.runner.wait(180) and w.runner.result is not None
    assert w.runner.result.module.blocks["line"].weight.shape == (1, 1)


def test_blocks_of_another_registry_train_in_a_thread(tmp_path, qtbot):
    from nodegraph.gui.training.runner import TrainingRunner, _ProcessWorker
    from nodegraph.model.spec import load_default_registry

    g = nodegraph.load("examples/xor.json", registry=load_default_registry())
    runner = TrainingRunner()
    runner.start(g, 0, epochs=3)
    assert not isinstance(runner._worker, _ProcessWorker)  # the process would not know them
    assert runner.wait(120) and len(runner.result.history) == 3


def test_curves_serve_the_next_run_and_go_when_it_has_no_numbers_for_them(xor_window):
    plots, deliver = xor_window.plots, xor_window.runner.deliver

    def run(keys):
        return [RunStarted(2, 1, 1, "cpu", 1),
                EpochEnded(1, 2, dict.fromkeys(keys, 0.5), {}, {}, 0.0), RunFinished([], {})]

    plots.reset({"acc"})
    deliver(run(["loss", "acc"]))
    curve = plots._curves["train loss"]
    assert [label.text for _, label in plots.metric_plot.legend.items] == ["train acc"]
    plots.reset({"acc"})
    deliver(run(["loss"]))
    assert plots._curves["train loss"] is curve and plots.points("train loss") == 1
    assert "train acc" not in plots._curves and not plots.metric_plot.legend.items


def test_a_run_that_never_started_leaves_no_busy_bar(window):
    status = window.run_status
    status.starting()
    assert status.isVisible() and status.bar.maximum() == 0
    window._on_run_state("idle")  # e.g. the process died before the run's first event
    assert not status.isVisible()


def test_the_first_train_does_not_wait_for_the_process_to_warm_up(monkeypatch, qtbot):
    from nodegraph.gui.training.runner import TrainingRunner, _ProcessWorker
    from nodegraph.runtime import train_process

    monkeypatch.setattr(train_process, "_idle", [])
    runner = TrainingRunner()  # starts a process, which imports torch and trains once
    assert not train_process._idle[0].ready.is_set()
    runner.start(nodegraph.load("examples/xor.json"), 0, epochs=3)
    assert not isinstance(runner._worker, _ProcessWorker)  # here, at once
    assert runner.wait(120) and len(runner.result.history) == 3
    assert train_process.wait_ready()
    runner.start(nodegraph.load("examples/xor.json"), 1, epochs=3)
    assert isinstance(runner._worker, _ProcessWorker)  # warm now: runs go there
    assert runner.wait(120) and len(runner.result.history) == 3


def test_where_no_training_process_starts_runs_train_in_a_thread(monkeypatch, qtbot):
    from nodegraph.gui.training.runner import TrainingRunner, _ProcessWorker
    from nodegraph.runtime import train_process

    def no_python(self):
        raise OSError("no Python to start")

    monkeypatch.setattr(train_process, "_idle", [])
    monkeypatch.setattr(train_process.TrainingProcess, "__init__", no_python)
    runner = TrainingRunner()  # starting one ahead fails quietly
    runner.start(nodegraph.load("examples/xor.json"), 0, epochs=3)
    assert not isinstance(runner._worker, _ProcessWorker)
    assert runner.wait(120) and len(runner.result.history) == 3
