"""Node badges: the rules on frames of real tensors, and a NaN that stops the run in the editor."""

from __future__ import annotations

import torch

import nodegraph
from nodegraph.gui.canvas.badges import diagnose, layer_grad_norms
from nodegraph.gui.document.files import examples_dir
from nodegraph.model.events import Emitter, RunFinished
from nodegraph.model.fileformat import load, save
from nodegraph.runtime.probes import ParamSummary, ProbeFrame, summarize_output
from nodegraph.runtime.train import RunControl


def frame_of(outputs: dict[str, torch.Tensor], params: dict[str, float] | None = None
             ) -> ProbeFrame:
    return ProbeFrame(1, 1, list(outputs), {n: {"output": summarize_output(t)}
                                            for n, t in outputs.items()}, {},
                      {k: ParamSummary(v, 1.0, 0.0) for k, v in (params or {}).items()})


def test_dead_relu_units_are_badged_with_their_share():
    torch.manual_seed(0)
    x = torch.randn(64, 8)
    bias = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, -100.0, -100.0, -100.0])  # 3 of 8 never fire
    out = torch.relu(x @ torch.randn(8, 8) + bias)
    (badge,) = diagnose(frame_of({"relu": out}))["relu"]
    assert badge.kind == "dead" and badge.text == "dead 38%"  # 3/8 = 37.5 %
    healthy = torch.relu(x @ torch.randn(8, 8))
    assert diagnose(frame_of({"relu": healthy})) == {}


def test_saturated_sigmoids_are_badged_but_not_a_layer_whose_output_lies_in_0_1():
    torch.manual_seed(0)
    s = torch.sigmoid(10 * torch.randn(128, 16))
    share = ((s < 0.01) | (s > 0.99)).float().mean().item()
    assert share > 0.5
    frame = frame_of({"act": s, "fc": s.clone()})
    badges = diagnose(frame, {"act": "activations.Sigmoid", "fc": "layers.Linear"})
    assert list(badges) == ["act"]
    assert badges["act"][0].text == f"saturated {share:.0%}"
    calm = torch.sigmoid(0.5 * torch.randn(128, 16))
    assert diagnose(frame_of({"act": calm}), {"act": "activations.Sigmoid"}) == {}


def test_vanishing_gradients_of_a_deep_sigmoid_net_badge_its_first_layers():
    # seed 002 §7.1: Xavier weights assume a slope of 1, a sigmoid has 1/4: each layer
    # shrinks the gradient about four-fold, fc1's is ~10⁻⁶ of fc10's at the first step
    g = load(examples_dir() / "deep_sigmoid_xavier.json")
    g.update_training(epochs=1, device="cpu")
    frames = []
    events, control = Emitter(), RunControl()
    events.subscribe(lambda f: (frames.append(f), control.stop()), ProbeFrame)  # one is enough
    nodegraph.train(g, events=events, control=control)
    frame = frames[0]
    norms = layer_grad_norms(frame)
    assert list(norms) == [f"fc{i}" for i in range(1, 11)] + ["out"]
    badges = diagnose(frame, {n: node.type for n, node in g.nodes.items()})
    vanishing = {n for n, bs in badges.items() for b in bs if b.kind == "vanishing"}
    assert vanishing == {n for n, v in norms.items() if v < norms["out"] / 100}
    assert "fc1" in vanishing and "fc10" not in vanishing
    assert not any(b.kind == "exploding" for bs in badges.values() for b in bs)


def test_exploding_is_relative_to_the_layer_nearest_the_loss():
    x = torch.randn(4, 3)
    outputs = {n: x for n in ("a", "b", "c", "d")}
    # the gradient grows on its way back from d: a's is 300 times d's
    badges = diagnose(frame_of(outputs, {"a.weight": 300.0, "a.bias": 4.0, "b.weight": 20.0,
                                         "c.weight": 2.0, "d.weight": 1.0}))
    assert [b.kind for b in badges["a"]] == ["exploding"] and set(badges) == {"a"}
    assert "300× larger than at d" in badges["a"][0].detail
    # two layers give no "typical" layer to compare with
    assert diagnose(frame_of({"a": x, "b": x}, {"a.weight": 1.0, "b.weight": 1e6})) == {}


def exploding_graph(path) -> str:
    """A ReLU net that a learning rate of 10³⁰ blows up: after the first step both layers'
    weights are ~10³⁰, the hidden values ~10³⁰ (finite), and the output layer multiplies
    the two: ~10⁶⁰, past float32's 3·10³⁸. So `out` is where the first Inf appears."""
    g = nodegraph.Graph("explodes")
    g.add("data.NoisyLine", "data")
    g.add("layers.Linear", "hidden", out_features=8)
    g.add("activations.ReLU", "act")
    g.add("layers.Linear", "out", out_features=1)
    g.add("losses.MSE", "loss")
    g.add("optimizers.SGD", "opt", lr=1e30)
    for source, target in [(("data", "x"), ("hidden", "input")),
                           (("hidden", "output"), ("act", "input")),
                           (("act", "output"), ("out", "input")),
                           (("out", "output"), ("loss", "input")),
                           (("data", "y"), ("loss", "target")),
                           (("loss", "loss"), ("opt", "loss"))]:
        g.connect(source, target)
    g.update_training(epochs=20, seed=0)
    save(g, path)
    return str(path)


def test_a_nan_from_a_huge_learning_rate_badges_the_node_and_stops_the_run(make_window,
                                                                            tmp_path):
    w = make_window(exploding_graph(tmp_path / "explodes.json"))
    finished, messages = [], []
    w.runner.listen(lambda e: finished.append(e) if isinstance(e, RunFinished) else None)
    w.statusBar().messageChanged.connect(messages.append)
    assert w.start_training()
    assert w.runner.wait(180)
    assert not finished  # stopped, not run to the end
    assert [b.text for b in w.watch.marks.badges("out")] == ["NaN/Inf"]
    assert not any(b.kind == "nonfinite" for n in ("hidden", "act", "loss")
                   for b in w.watch.marks.badges(n))
    assert any("first non-finite value appeared at node 'out'" in m for m in messages)
    assert any("node 'out'" in line for line in w.log.lines)
    # a new run starts clean
    w.doc.set_training("epochs", 0)
    assert w.start_training() and w.runner.wait(180)
    assert w.watch.marks.badges("out") == []
