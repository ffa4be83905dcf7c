"""Node views in the editor: each kind opened on its example shows the right numbers.

The XOR run feeds the live tabs (histograms over time equal the frames', gradient norms
per layer) and the decision boundary on the trained weights; the deep sigmoid net shows
its vanishing gradients; the other examples are viewed on their initial weights, each
checked against a formula or the model's own outputs: conv feature maps against
F.conv2d, attention rows summing to one per head, the VAE's latent PCA, Hopfield energies,
sample grids and Gibbs chains. Frames recorded by --probe-out replay in the same tabs.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PySide6.QtCore import QCoreApplication, QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QContextMenuEvent, QMouseEvent
from PySide6.QtWidgets import QApplication

from nodegraph.gui.training import node_views as nv
from nodegraph.runtime import viewdata as vd
from nodegraph.runtime.probes import ProbeFrame, read_frames

EXAMPLES = Path(__file__).parent.parent.parent / "examples"


def example(make_window, name: str):
    w = make_window(str(EXAMPLES / f"{name}.json"))
    w.validator.wait(60)
    return w


def train(w, epochs: int) -> None:
    """Train from the editor, probing often (a busy machine would otherwise spread the
    frames thin: the prober keeps within its time budget)."""
    w.doc.set_training("probe_every", 4)
    w.doc.set_training("probe_budget", 1.0)
    w.doc.set_training("probe_rate", 0)
    w.epochs.setValue(epochs)
    assert w.start_training()
    assert w.runner.wait(120)
    QCoreApplication.processEvents()


def image_of(view: nv.View) -> np.ndarray:
    """The picture an ImageItem in the view's canvas holds (row-major)."""
    items = [i for i in view.canvas.scene().items() if isinstance(i, nv.pg.ImageItem)]
    assert items, "the view draws no image"
    return items[0].image


def test_xor_run_feeds_histograms_layers_and_the_decision_boundary(make_window, qtbot):
    w = example(make_window, "xor")
    assert [v.title for v in w.node_views.open("hidden").views] == ["Histograms", "Layers"]
    dock = w.node_views.open("out")  # open while the run goes: the timer keeps it current
    assert dock.isVisible() and dock.node == "out"
    assert [v.title for v in dock.views] == ["Decision boundary", "Histograms", "Layers"]
    assert "initial weights" in dock.header.text()
    train(w, 80)
    frames = list(w.node_views.frames)
    assert len(frames) >= 3 and all(isinstance(f, ProbeFrame) for f in frames)
    assert "trained weights" in dock.header.text()  # redrawn when the run ended

    hist = dock.view(nv.HistogramView)
    qtbot.waitUntil(lambda: hist.data.get("output") is not None
                    and hist.data["output"].steps[-1] == frames[-1].step, timeout=30_000)
    expected = vd.histogram_history(frames, "out", "output")
    assert hist.data["output"].steps == expected.steps == [f.step for f in frames]
    assert hist.data["output"].counts == pytest.approx(expected.counts)
    assert hist.data["output"].counts.sum(1) == pytest.approx(
        [sum(f.outputs["out"]["output"].hist.counts) for f in frames])  # 4 samples
    assert hist.data["grad"].counts.sum(1) == pytest.approx([4] * len(frames))
    first = frames[0].outputs["out"]["output"]
    lo, hi = hist.data["output"].edges[[0, -1]]
    assert lo <= first.min and first.max <= hi
    shown = next(i for i in hist.plots["output"].items  # value bins up, steps across
                 if isinstance(i, nv.pg.ImageItem)).image
    xs, counts = vd.on_step_axis(expected)
    assert shown.shape == (64, len(xs)) and xs[-1] == frames[-1].step
    share = counts[-1] / counts[-1].sum()
    assert shown[:, -1] == pytest.approx(np.sqrt(share))  # the last column: the last frame

    layers = dock.view(nv.GradNormView)
    last = frames[-1]
    assert list(layers.data) == ["hidden", "out"]
    assert layers.data["hidden"] == pytest.approx(math.hypot(
        last.params["hidden.weight"].grad_norm, last.params["hidden.bias"].grad_norm))

    decision = dock.view(nv.DecisionView)
    grid = decision.data
    compiled = w.runner.result.compiled
    w1, b1, w2, b2 = (t.detach().cpu() for n in ("hidden", "out")
                      for t in (compiled.module.blocks[n].weight, compiled.module.blocks[n].bias))
    j, i = 10, 70  # a grid point: x = xs[j], y = ys[i]
    point = torch.tensor([[grid.xs[j], grid.ys[i]]], dtype=torch.float32)
    logit = (torch.tanh(point @ w1.T + b1) @ w2.T + b2).item()
    assert grid.prob[i, j] == pytest.approx(1 / (1 + math.exp(-logit)), abs=1e-5)
    assert image_of(decision) == pytest.approx(grid.prob)  # P(class 1), as drawn
    corners = [grid.classes[np.abs(grid.ys - y).argmin(), np.abs(grid.xs - x).argmin()]
               for x, y in grid.points]
    assert corners == grid.labels.tolist() == [0, 1, 1, 0]  # XOR learnt
    assert "100% of the training points" in decision.status.text()


def test_deep_sigmoid_layers_chart_shows_vanishing_gradients(make_window):
    w = example(make_window, "deep_sigmoid")
    train(w, 1)
    dock = w.node_views.open_layers()
    view = dock.view(nv.GradNormView)
    frames = list(w.node_views.frames)
    assert view.data == vd.layer_grad_norms(frames[-1])
    assert list(view.data) == [f"fc{i}" for i in range(1, 11)] + ["out"]
    bars = next(i for i in view.bars.items if isinstance(i, nv.pg.BarGraphItem))
    tops = bars.opts["y0"] + bars.opts["height"]
    assert tops == pytest.approx(np.log10(list(view.data.values())))
    assert view.data["fc1"] < view.data["out"] / 5
    assert "fc1 gets" in view.status.text()


def test_live_tabs_redraw_on_the_timer_not_per_frame(make_window):
    w = example(make_window, "xor")
    dock = w.node_views.open("act")
    hist = dock.view(nv.HistogramView)
    assert "No probe frames" in hist.status.text()
    x = torch.linspace(-1, 1, 16).reshape(4, 4)
    from nodegraph.runtime.probes import summarize_grad, summarize_output
    for step in (1, 11, 21):
        w.runner.deliver([ProbeFrame(1, step, ["act"], {"act": {"output": summarize_output(
            x * step)}}, {"act": {"output": summarize_grad(x)}}, {})])
    assert len(w.node_views.frames) == 3 and not hist.data  # stored, not drawn yet
    w.node_views.refresh_live()  # what the timer does
    assert hist.data["output"].steps == [1, 11, 21]
    assert hist.data["output"].edges[-1] == pytest.approx(21.0)


def test_probe_recording_replays_in_the_views(make_window, tmp_path):
    from nodegraph.cli.main import main

    out = tmp_path / "probes.jsonl"
    assert main(["run", str(EXAMPLES / "xor.json"), "--epochs", "30", "--probe-out",
                 str(out), "--quiet"]) in (0, None)
    recorded = list(read_frames(out))
    w = example(make_window, "xor")
    assert w.node_views.load_recording(str(out)) == len(recorded) > 0
    dock = w.node_views.open("out")
    assert "probe.jsonl" in dock.header.text() or "probes.jsonl" in dock.header.text()
    hist = dock.view(nv.HistogramView)
    assert hist.data["output"].counts == pytest.approx(
        vd.histogram_history(recorded, "out", "output").counts)


def test_feature_maps_are_the_convolution_of_the_sample(make_window):
    w = example(make_window, "cnn_digits")
    dock = w.node_views.open("conv1")
    view = dock.view(nv.FeatureMapView)
    assert view is dock.views[0]
    compiled = w.node_views.compiled()[0]
    x = vd.data_values(compiled, "train", 1)[("data", "x")]
    conv = compiled.module.blocks["conv1"]
    maps = torch.nn.functional.conv2d(x, conv.weight, conv.bias)[0].detach().cpu().numpy()
    assert view.data.shape == (6 * 27 - 1, 6 * 27 - 1)  # 32 maps of 26×26 on a 6×6 grid
    tile = view.data[27:53, 54:80]  # row 1, column 2: channel 8
    assert tile == pytest.approx(vd.normalized(maps[8]), abs=1e-5)
    out = torch.nn.functional.conv2d(x, conv.weight, conv.bias).detach()
    from nodegraph.runtime.probes import summarize_output
    w.runner.deliver([ProbeFrame(1, 7, ["conv1"], {"conv1": {"output": summarize_output(
        out)}}, {}, {})])
    w.node_views.refresh_live()
    step, thumb = view.thumb  # the probe's thumbnail of training, beside the maps
    assert step == 7 and thumb == pytest.approx(maps[0], abs=1e-4)
    view.sample.setValue(3)
    x3 = vd.data_values(compiled, "train", 4)[("data", "x")][3:4]
    maps3 = torch.nn.functional.conv2d(x3, conv.weight, conv.bias)[0].detach().cpu().numpy()
    assert view.data[:26, :26] == pytest.approx(vd.normalized(maps3[0]), abs=1e-5)


def test_attention_heat_maps_per_head(make_window):
    w = example(make_window, "vit_digits")
    dock = w.node_views.open("block2")
    view = dock.view(nv.AttentionView)
    assert view.data.shape == (4, 17, 17)  # 4 heads over the class token and 16 patches
    assert view.data.sum(-1) == pytest.approx(np.ones((4, 17)), abs=1e-5)
    compiled = w.node_views.compiled()[0]
    weights = vd.node_outputs(compiled, "block2", vd.data_values(compiled, "train", 16))
    assert view.data == pytest.approx(weights["weights"][0].cpu().numpy())
    images = [i for i in view.canvas.scene().items() if isinstance(i, nv.pg.ImageItem)]
    assert len(images) == 4
    assert sorted(float(i.image.sum()) for i in images) == pytest.approx([17.0] * 4, abs=1e-3)
    from nodegraph.runtime.probes import summarize_output
    probed = weights["weights"] * 0.5
    w.runner.deliver([ProbeFrame(1, 3, ["block2"], {"block2": {
        "weights": summarize_output(probed), "output": summarize_output(weights["output"])}},
        {}, {})])
    w.node_views.refresh_live()  # the probes' thumbnail of head 1 joins the heads
    step, thumb = view.thumb
    assert step == 3 and thumb == pytest.approx(probed[0, 0].cpu().numpy(), abs=1e-5)
    images = [i for i in view.canvas.scene().items() if isinstance(i, nv.pg.ImageItem)]
    assert len(images) == 5


def test_vae_latent_scatter_coloured_by_digit(make_window):
    w = example(make_window, "vae_digits")
    dock = w.node_views.open("encoder")
    view = dock.view(nv.LatentView)
    assert view is dock.views[0] and view.port.currentText() == "mu"
    s = view.data
    compiled = w.node_views.compiled()[0]
    values = vd.data_values(compiled, "val")
    mu = vd.node_outputs(compiled, "encoder", values)["mu"].cpu().numpy()
    assert s.points == pytest.approx(vd.pca_2d(mu)[0], abs=1e-4)
    assert s.labels.tolist() == values[("data", "y")].tolist()
    scatters = [i for i in view.canvas.scene().items() if isinstance(i, nv.pg.ScatterPlotItem)]
    assert sum(len(i.data) for i in scatters) == len(s.points)
    assert len(scatters) == len(set(s.labels.tolist())) == 10  # one colour per digit


def test_sample_grid_gibbs_chain_and_ddpm_strip(make_window):
    w = example(make_window, "gan_digits")
    view = w.node_views.open("samples").view(nv.TrajectoryView)
    assert view.data.kind == "images" and view.data.images.shape == (1, 16, 8, 8)
    assert image_of(view).shape == (4 * 9 - 1, 4 * 9 - 1)  # a 4×4 grid of 8×8 samples
    assert np.nansum(image_of(view)) == pytest.approx(view.data.images.sum(), rel=1e-5)

    w = example(make_window, "rbm_digits")
    view = w.node_views.open("sample").view(nv.TrajectoryView)
    t = view.data
    assert t.images.shape == (8, 10, 8, 8) and t.labels[-1] == "step 50"
    start = t.images[:, 0].reshape(8, 64)
    assert set(np.unique(start)) <= {0.0, 1.0}  # chains start at fair coins (start=noise)
    assert ((t.images[:, 1:] > 0) & (t.images[:, 1:] < 1)).all()  # then P(v = 1 | h)


def test_hopfield_recall_energy_per_step(make_window):
    w = example(make_window, "hopfield_2d")
    dock = w.node_views.open("hopfield")
    view = dock.view(nv.RecallView)
    r = view.data
    block = w.node_views.compiled()[0].module.blocks["hopfield"]
    x = r.trajectory
    weight, bias = block.weight.cpu().numpy(), block.bias.cpu().numpy()
    energy = -0.5 * np.einsum("nsi,ij,nsj->ns", x, weight, x) - x @ bias
    assert r.energy == pytest.approx(energy, abs=1e-4)
    curves = [i for i in view.canvas.scene().items() if isinstance(i, nv.pg.PlotCurveItem)]
    assert len(curves) >= len(r.energy)
    assert "16 of 16 samples settled" in view.status.text()


def test_opening_from_menu_alt_double_click_and_context_menu(xor_window):
    w = xor_window
    w.validator.wait(60)
    assert {"node_view", "grad_norms", "load_probes"} <= set(w.actions_by_name)
    w.scene.select_nodes(["out"])
    w.actions_by_name["node_view"].trigger()
    assert w.node_views.panel.node == "out"
    viewport = w.view.viewport()
    pos = w.view.mapFromScene(w.scene.nodes["hidden"].sceneBoundingRect().center())
    event = QMouseEvent(QEvent.Type.MouseButtonDblClick, QPointF(pos),
                        QPointF(viewport.mapToGlobal(pos)), Qt.MouseButton.LeftButton,
                        Qt.MouseButton.LeftButton, Qt.KeyboardModifier.AltModifier)
    QApplication.sendEvent(viewport, event)
    assert w.node_views.panel.node == "hidden"
    pos = w.view.mapFromScene(w.scene.nodes["act"].sceneBoundingRect().center())
    QApplication.sendEvent(viewport, QContextMenuEvent(QContextMenuEvent.Reason.Mouse, pos,
                                                       viewport.mapToGlobal(pos)))
    menu = w.node_views.context_menu
    assert [a.text() for a in menu.actions()][0] == "Open Node View of 'act'"
    menu.actions()[0].trigger()
    assert w.node_views.panel.node == "act"
    empty = w.view.mapFromScene(w.scene.itemsBoundingRect().bottomRight() + QPointF(300, 300))
    QApplication.sendEvent(viewport, QContextMenuEvent(QContextMenuEvent.Reason.Mouse, empty,
                                                       viewport.mapToGlobal(QPoint(0, 0))))
    assert w.node_views.context_menu is menu  # not on a node: no node menu


def test_model_tabs_follow_the_weights_while_the_run_trains(make_window, qtbot, monkeypatch):
    """During a run the decision boundary is redrawn on the epoch's weights (a copy the
    trainer sends), not only when the run ends."""
    monkeypatch.setattr(nv, "MODEL_REFRESH_S", 0.0)
    w = example(make_window, "xor")
    dock = w.node_views.open("out")
    initial = dock.view(nv.DecisionView).data.scores.copy()
    w.epochs.setValue(100000)
    assert w.start_training()
    try:
        qtbot.waitUntil(lambda: "(training)" in dock.header.text(), timeout=120_000)
        snap = w.node_views._snapshot_drawn
        live = w.node_views._live_model[1]
        for k, v in live.module.block_state().items():
            assert torch.equal(v, snap.state[k])
        shown = dock.view(nv.DecisionView).data
        assert shown.scores == pytest.approx(vd.decision_grid(live, "out").scores)
        assert not np.allclose(shown.scores, initial)
    finally:
        w.runner.stop()
        assert w.runner.wait(120)
