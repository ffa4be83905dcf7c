"""The training wave: forward in topological order, backward in reverse, latest frame wins."""

from __future__ import annotations

import math

from PySide6.QtGui import QColor

from nodegraph.gui.training.animation import BACKWARD_COLORS, FORWARD_COLORS, MAX_WIDTH, MIN_WIDTH
from nodegraph.model.graph import Edge
from tests.gui.test_training import wait_until


def probe_every_step(w) -> None:
    """Every step probed, whatever it costs: a short run yields many frames."""
    w.doc.set_training("probe_every", 1)
    w.doc.set_training("probe_budget", 1000.0)
    w.doc.set_training("probe_rate", 0)


def waves(played) -> dict[int, list[tuple[str, str]]]:
    """The played steps grouped by frame step, in playing order."""
    out: dict[int, list[tuple[str, str]]] = {}
    for step, phase, node in played:
        out.setdefault(step, []).append((phase, node))
    return out


def test_training_xor_plays_forward_then_backward_in_graph_order(xor_window):
    w = xor_window
    animator = w.watch.animator
    animator.set_speed(1)  # a node per millisecond: several whole waves during the run
    finished = []
    animator.wave_finished.connect(finished.append)
    probe_every_step(w)
    w.epochs.setValue(12)
    assert w.start_training()
    assert w.runner.wait(180)
    assert wait_until(lambda: finished, timeout=30)
    frames = {f.step: f for f in w.watch.timeline.log.frames}
    assert len(frames) >= 2
    topo = w.doc.graph.topological_order()
    wave = waves(animator.played)[finished[0]]
    frame = frames[finished[0]]
    forward = [n for phase, n in wave if phase == "forward"]
    backward = [n for phase, n in wave if phase == "backward"]
    # all forward steps come first: the data, then every probed node in topological order
    assert wave == [("forward", n) for n in forward] + [("backward", n) for n in backward]
    assert forward == ["data", "hidden", "act", "out", "loss"]
    assert sorted(forward, key=topo.index) == forward
    # backward: the nodes the loss's gradient reaches, from the loss back to the first layer
    assert backward == ["loss", "out", "act", "hidden"]
    assert backward == [n for n in reversed(frame.order) if n in frame.grads]


def test_wire_width_grows_with_activation_and_gradient_size(xor_window):
    w = xor_window
    probe_every_step(w)
    w.epochs.setValue(5)
    assert w.start_training() and w.runner.wait(180)
    frame = w.watch.timeline.log.frames[-1]
    animator, marks = w.watch.animator, w.watch.marks
    forward_steps = sum(1 for s in animator.steps if s.phase == "forward") or 5
    animator.seek(frame, forward_steps)  # the whole forward phase shown, none of the backward
    edges = {"hidden": Edge("hidden", "output", "act", "input"),
             "act": Edge("act", "output", "out", "input"),
             "out": Edge("out", "output", "loss", "input")}
    rms = {n: math.hypot(frame.outputs[n]["output"].mean, frame.outputs[n]["output"].std)
           for n in edges}
    widths = {n: marks.stroke(e).width for n, e in edges.items()}
    assert sorted(rms, key=rms.get) == sorted(widths, key=widths.get)
    assert all(MIN_WIDTH <= v <= MAX_WIDTH for v in widths.values())
    # the largest activation of the frame gets the widest stroke, the smallest the thinnest
    probed = [math.hypot(s.mean, s.std) for n in frame.order
              for s in frame.outputs[n].values()]
    if max(rms.values()) == max(probed):
        assert max(widths.values()) == MAX_WIDTH
    assert marks.stroke(edges["act"]).color.blue() > marks.stroke(edges["act"]).color.red()

    animator.seek(frame, len(animator.steps))  # the backward phase done: gradient colours
    norms = {n: frame.grads[n]["output"].norm for n in edges}
    widths = {n: marks.stroke(e).width for n, e in edges.items()}
    assert sorted(norms, key=norms.get) == sorted(widths, key=widths.get)
    color = marks.stroke(edges["act"]).color
    assert color.red() > color.blue()  # orange, against the forward blue
    lo, hi = QColor(BACKWARD_COLORS[0]), QColor(BACKWARD_COLORS[1])
    assert min(lo.red(), hi.red()) <= color.red() <= max(lo.red(), hi.red())
    assert QColor(FORWARD_COLORS[0]) != QColor(BACKWARD_COLORS[0])


def test_frames_arriving_during_a_wave_are_dropped_not_queued(xor_window):
    w = xor_window
    probe_every_step(w)
    w.epochs.setValue(6)
    assert w.start_training() and w.runner.wait(180)
    frames = w.watch.timeline.log.frames
    assert len(frames) >= 4
    animator = w.watch.animator
    animator.stop()
    animator.set_speed(10_000)  # a wave far longer than the frames' arrival
    dropped = animator.dropped
    for f in frames[:4]:
        animator.push(f)
    assert animator.frame is frames[0] and animator.playing
    assert animator.pending is frames[3] and animator.dropped - dropped == 2
    animator.set_speed(1)
    assert wait_until(lambda: animator.frame is frames[3] and not animator.playing, 5)
    played = {step for step, _, _ in animator.played}
    assert frames[1].step not in played and frames[2].step not in played


def test_pause_holds_the_wave_and_training_goes_on(xor_window):
    w = xor_window
    w.watch.timeline.pause.setChecked(True)
    assert w.watch.animator.paused
    probe_every_step(w)
    w.epochs.setValue(4)
    assert w.start_training() and w.runner.wait(180)
    assert len(w.watch.timeline.log) >= 2  # frames were recorded
    animator = w.watch.animator
    assert not animator.playing and animator.pos == 0  # the first frame waits at its start
    w.watch.timeline.pause.setChecked(False)
    assert animator.playing


def test_an_edit_clears_the_wave_and_a_removed_wire_takes_its_marks_along(xor_window):
    w = xor_window
    probe_every_step(w)
    w.epochs.setValue(3)
    assert w.start_training() and w.runner.wait(180)
    frame = w.watch.timeline.log.frames[-1]
    animator, marks = w.watch.animator, w.watch.marks
    animator.seek(frame, 3)
    gone = Edge("hidden", "output", "act", "input")
    stroke = marks.stroke(gone)
    assert stroke.color is not None and stroke.scene() is w.scene
    w.scene.select_nodes(["act"])
    w.edit_actions.delete_selection()
    assert "act" not in w.doc.graph.nodes
    assert stroke.scene() is None and marks.stroke(gone) is None
    assert all(marks.stroke(e).color is None for e in w.scene.wires)
    animator.play(frame)  # the old frame still plays on what is left of the graph
    assert wait_until(lambda: not animator.playing, 10)


def test_the_wave_leaves_the_wires_shape_labels_readable(xor_window):
    w = xor_window
    w.view.minimap.set_enabled(False)
    w.validator.validate_now()
    w.view.set_zoom(1.0)
    edge = Edge("hidden", "output", "act", "input")
    wire = w.scene.wires[edge]
    label = wire.shown_label_rect()
    assert wire.label and not label.isEmpty()
    w.view.centerOn(label.center())
    marks = w.watch.marks
    magenta = QColor("#ff00ff")  # a colour nothing else on the canvas has
    stroke = marks.stroke(edge)
    stroke.set_stroke(magenta, 14.0)  # the widest wave: wider than the label is tall
    w.view.viewport().repaint()
    image = w.view.viewport().grab().toImage()

    def magenta_in(rect) -> int:
        box = w.view.mapFromScene(rect).boundingRect()
        return sum(image.pixelColor(x, y) == magenta for x in range(box.left(), box.right())
                   for y in range(box.top(), box.bottom()))

    assert magenta_in(label) == 0  # the label is drawn over nothing of the wave
    assert magenta_in(wire.path().controlPointRect().adjusted(0, -8, 0, 8)) > 50  # beside it
    stroke.set_pulse(0.5)  # the dot runs under the label: hidden there
    at = stroke.dot.pos()
    assert stroke.dot.isVisible() == (not label.adjusted(-8, -8, 8, 8).contains(at))
