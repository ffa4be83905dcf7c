"""Live changes while training: an optimizer's lr (a param its block marks `live`) sent to
a running run applies from the next step — the optimizer and its history say so — and a
param the optimizer does not hold is said, not applied."""

from __future__ import annotations

from nodegraph.model.events import Emitter, Message, StepEnded
from nodegraph.model.graph import Graph
from nodegraph.model.spec import default_registry
from nodegraph.runtime.train import RunControl, train


def xor() -> Graph:
    g = Graph("xor")
    g.add("data.XOR", "data")
    g.add("layers.Linear", "hidden", out_features=4)
    g.add("activations.Tanh", "act")
    g.add("layers.Linear", "out", out_features=1)
    g.add("losses.BCEWithLogits", "loss")
    g.add("optimizers.Adam", "opt", lr=0.05)
    for a, b in [(("data", "x"), ("hidden", "input")), (("hidden", "output"), ("act", "input")),
                 (("act", "output"), ("out", "input")), (("out", "output"), ("loss", "input")),
                 (("data", "y"), ("loss", "target")), (("loss", "loss"), ("opt", "loss"))]:
        g.connect(a, b)
    return g


def test_optimizer_lr_is_marked_live():
    for block in ("optimizers.Adam", "optimizers.SGD"):
        assert default_registry().get(block).param("lr").live


def test_an_lr_sent_mid_run_applies_from_the_next_step_and_is_in_the_history():
    control, events, said = RunControl(), Emitter(), []
    events.subscribe(lambda e: said.append(e.text if hasattr(e, "text") else str(e)), Message)

    def at_step(e: StepEnded) -> None:
        if e.epoch == 2 and e.step == 1:
            control.set_param("opt", "lr", 0.2)
            control.set_param("opt", "no_such", 1)

    events.subscribe(at_step, StepEnded)
    result = train(xor(), epochs=4, events=events, control=control)
    # XOR trains one step an epoch: sent during epoch 2's step, it applies from step 3
    assert [h["lr"]["opt"] for h in result.history] == [0.05, 0.05, 0.2, 0.2]
    assert result.history[2]["changes"] == [{"node": "opt", "param": "lr", "value": 0.2,
                                             "before": 0.05, "epoch": 3, "step": 3}]
    assert all("changes" not in result.history[i] for i in (0, 1, 3))
    assert any("opt.no_such cannot change while training" in s for s in said)
