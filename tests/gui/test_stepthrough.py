"""Step-through: one batch walked node by node, the notes' numbers drawn on the wires."""

from __future__ import annotations

import pytest
import torch

from nodegraph.gui.document.files import examples_dir
from nodegraph.gui.training.stepthrough import fmt_values
from nodegraph.model.graph import Edge


def edge(text: str) -> Edge:
    (src, sp), (dst, dp) = (side.strip().split(".") for side in text.split("->"))
    return Edge(src, sp, dst, dp)


def walk_to(w, phase: str, node: str) -> None:
    panel = w.watch.steps
    while (panel.trace.stop.phase, panel.trace.record.node) != (phase, node):
        assert panel.next_button.isEnabled(), f"never reached {phase} {node}"
        panel.next_button.click()


def test_the_2_1_2_network_shows_the_notes_numbers_on_its_wires(make_window):
    w = make_window(str(examples_dir() / "mlp_212.json"))
    w.actions_by_name["step"].trigger()
    panel, marks = w.watch.steps, w.watch.marks
    assert panel.trace is not None and panel.title.text() == "Forward 1/5: hidden"
    assert marks.label_text(edge("data.x -> hidden.input")) == "5, 2"
    assert marks.label_text(edge("hidden.output -> relu1.input")) == "1.6"  # 0.5·5 − 0.5·2 + 0.1
    assert marks.label_text(edge("out.output -> relu2.input")) == ""  # not reached yet
    assert "output output (1, 1):\n  1.6" in panel.values.toPlainText()
    assert marks.node("hidden").ring is not None and marks.node("out").ring is None
    walk_to(w, "forward", "out")
    # 0.7·1.6 + 0.2 and 0.3·1.6 − 0.2
    assert marks.label_text(edge("out.output -> relu2.input")) == "1.32, 0.28"
    assert "input input (1, 1):\n  1.6" in panel.values.toPlainText()
    assert marks.node("out").ring is not None and marks.node("hidden").ring is None
    walk_to(w, "forward", "loss")
    assert marks.label_text(edge("relu2.output -> loss.input")) == "1.32, 0.28"
    assert marks.label_text(edge("data.y -> loss.target")) == "1.32, 0.28"
    assert float(marks.label_text(edge("loss.loss -> opt.loss"))) < 1e-12  # on target
    panel.prev_button.click()
    assert panel.title.text() == "Forward 4/5: relu2"
    assert marks.label_text(edge("data.y -> loss.target")) == ""  # the loss is not reached


def test_backward_shows_the_gradient_at_each_node_on_the_appendix_network(make_window):
    w = make_window(str(examples_dir() / "backprop_appendix.json"))
    assert w.watch.step()
    panel, marks = w.watch.steps, w.watch.marks
    walk_to(w, "forward", "out")
    # the notes' ξ² for the three patterns (seed 004, T7-T11)
    assert marks.label_text(edge("out.output -> mse.input")) == "0.986\n1.98\n1.8"
    assert marks.label_text(edge("out.output -> mse.input"), below=True) == ""
    walk_to(w, "backward", "loss")
    assert panel.title.text() == "Backward 1/5: loss"
    assert marks.label_text(edge("loss.loss -> opt.loss"), below=True) == "∂L 1"
    walk_to(w, "backward", "out")
    # E = ½·mean (ξ − t)², so ∂E/∂ξ = (ξ − t) / 3 for the three patterns
    xi = torch.tensor([0.9859962, 1.9777393, 1.8023610])
    t = torch.tensor([-1.0, 1.0, 1.0])
    expected = fmt_values(((xi - t) / 3)[:, None])
    assert expected == "0.662\n0.326\n0.267"
    assert marks.label_text(edge("out.output -> mse.input"), below=True) == \
        "∂L " + expected.replace("\n", "\n   ")
    assert "∂L/∂output (3, 1):\n  0.662\n  0.326\n  0.267" in panel.values.toPlainText()
    walk_to(w, "backward", "hidden")
    assert not panel.next_button.isEnabled()  # the walk ends at the first layer
    # the sigmoid's gradient: ∂E/∂h = ∂E/∂s · s(1 − s), s the sigmoid's output
    trace = panel.trace
    s = trace.by_node["sigmoid"].outputs["output"]
    g = trace.by_node["sigmoid"].grads["output"] * s * (1 - s)
    assert torch.allclose(trace.by_node["hidden"].grads["output"], g, atol=1e-6)
    assert marks.label_text(edge("hidden.output -> sigmoid.input"), below=True) == \
        "∂L " + fmt_values(g).replace("\n", "\n   ")


def test_step_uses_the_trained_weights_after_a_run_and_waits_for_a_running_one(xor_window):
    w = xor_window
    w.watch.step()
    before = w.watch.steps.trace.by_node["hidden"].outputs["output"].clone()
    w.epochs.setValue(3)
    assert w.start_training()
    assert not w.watch.step()  # a running graph is not traced
    assert "Stop the run first" in w.watch.steps.title.text()
    assert w.runner.wait(180)
    assert w.watch.step()
    trained = w.watch.steps.trace.by_node["hidden"].outputs["output"]
    state = w.runner.result.compiled.module.block_state()
    x = w.watch.steps.trace.by_node["hidden"].inputs["input"]
    assert torch.allclose(trained, x @ state["hidden.weight"].T + state["hidden.bias"], atol=1e-6)
    assert not torch.allclose(trained, before)


@pytest.mark.parametrize("values, text", [
    (torch.tensor([[1.6]]), "1.6"), (torch.tensor([[1.32, 0.28]]), "1.32, 0.28"),
    (torch.tensor(4.4e-16), "4.4e-16"), (torch.tensor([[1.0, 2.0], [3.0, 4.0]]), "1, 2\n3, 4"),
    (torch.arange(20.0).reshape(4, 5), "(4, 5)\nmean 9.5 ± 5.92"),
])
def test_values_are_printed_as_a_student_reads_them(values, text):
    assert fmt_values(values) == text


def test_box_tensors_read_as_corners_on_wires_and_in_the_panel():
    """A wire of port type boxes shows the first image's boxes as corners, padding left out;
    a tensor of 4 features that is not boxes stays numbers."""
    from nodegraph.gui.training.stepthrough import StepTrace, fmt_boxes
    from nodegraph.runtime.probes import TraceRecord

    boxes = torch.tensor([[[2.0, 3, 10, 12], [20, 21, 30, 40], [0, 0, 0, 0]],
                          [[1.0, 1, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0]]])
    assert fmt_boxes(boxes) == "2 box(es) of image 0\n(2, 3)–(10, 12)\n(20, 21)–(30, 40)"
    records = [TraceRecord("nms", {}, {"boxes": boxes, "scores": torch.ones(2, 3, 4)}, {}),
               TraceRecord("map", {"boxes": boxes, "scores": torch.ones(2, 3, 4)}, {}, {})]
    edges = [Edge("nms", "boxes", "map", "boxes"), Edge("nms", "scores", "map", "scores")]
    trace = StepTrace(records, edges, frozenset({("nms", "boxes")}))
    trace.move(1)
    shown = trace.shown_values()
    assert shown[edges[0]].startswith("2 box(es) of image 0\n(2, 3)–(10, 12)")
    assert "box" not in shown[edges[1]]  # (2, 3, 4) scores are not boxes
    assert "(20, 21)–(30, 40)" in trace.describe()
