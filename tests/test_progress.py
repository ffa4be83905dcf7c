"""`train(..., progress=True)`: the text line outside Jupyter, and the notebook's progress
bar and live loss plot with IPython's display replaced by a recorder."""

from __future__ import annotations

import io
import re
import sys
import types
import xml.etree.ElementTree as ET

import pytest

import nodegraph
from nodegraph.model.errors import NodegraphError
from nodegraph.runtime.callbacks import Callback
from nodegraph.runtime.callbacks.progress import Progress, mode_of
from nodegraph.runtime.loss_plot import loss_plot

SVG = "{http://www.w3.org/2000/svg}"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_in_a_pipe_it_writes_whole_lines_about_twenty_a_run(capsys):
    graph = nodegraph.load("examples/logistic_binary.json")
    result = nodegraph.train(graph, epochs=40, progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert 10 <= len(lines) <= 21 and "\r" not in "".join(lines)
    assert lines[0].startswith("[") and "epoch 2/40" in lines[0]
    last = lines[-1]
    assert "epoch 40/40" in last and "100%" in last and "done" in last
    assert last.startswith("[" + "#" * 24 + "]")
    loss = result.history[-1]["train"]["loss"]
    assert f"train loss {loss:.4g}" in last
    assert f"val loss {result.history[-1]['val']['loss']:.4g}" in last


def test_on_a_terminal_one_line_is_rewritten_at_each_step():
    graph = nodegraph.load("examples/xor.json")
    graph.set_param("data", "batch_size", 1)  # four steps an epoch
    screen = Terminal()
    nodegraph.train(graph, epochs=3, callbacks=[Progress("text", screen, min_interval=0)])
    text = screen.getvalue()
    frames = text.split("\r\x1b[K")[1:]
    assert len(frames) == 1 + 3 * 4 + 3 + 1  # start, each step, each epoch's end, the end
    assert text.endswith("\n") and text.count("\n") == 1
    assert "step 2/4" in frames[2] and "epoch 1/3" in frames[2]
    shares = [int(re.search(r"(\d+)%", f).group(1)) for f in frames]
    assert shares == sorted(shares) and shares[-1] == 100
    assert "epoch 3/3" in frames[-1] and "done" in frames[-1]


class Recorder:
    """Stands in for IPython.display: records what a cell would show."""

    def __init__(self):
        self.shown: list[tuple[str, object]] = []
        self.updates: list[str] = []

    def module(self) -> types.ModuleType:
        mod = types.ModuleType("IPython.display")
        recorder = self

        class HTML:
            def __init__(self, data: str):
                self.data = data

        class Handle:
            def update(self, obj) -> None:
                recorder.updates.append(obj.data)

        def display(obj, display_id=None):
            recorder.shown.append((obj.data, display_id))
            return Handle() if display_id else None

        mod.HTML, mod.display = HTML, display
        return mod


@pytest.fixture
def notebook(monkeypatch):
    """A Jupyter kernel as `in_notebook` sees it, with a recording display."""
    recorder = Recorder()
    ipython = types.ModuleType("IPython")
    kernel_shell = types.SimpleNamespace(kernel=object())
    ipython.get_ipython = lambda: kernel_shell
    display = recorder.module()
    ipython.display = display
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    return recorder


def test_in_a_notebook_one_cell_shows_a_bar_and_the_live_loss_curves(notebook, capsys):
    graph = nodegraph.load("examples/logistic_binary.json")
    result = nodegraph.train(graph, epochs=6, progress=True)
    assert capsys.readouterr().err == ""  # no text line beside the cell
    ((first, display_id),) = notebook.shown
    assert display_id is True and "starting" in first
    assert 1 <= len(notebook.updates) <= 6 + 1  # throttled: at most each epoch, and the end
    final = ET.fromstring(notebook.updates[-1])
    bar = final.find(".//progress")
    assert float(bar.get("value")) == 1.0
    assert "done" in final.find(".//span").text
    plot = final.find(f".//{SVG}svg")
    names = [t.text for t in plot.iter(f"{SVG}text")]
    assert "train loss" in names and "val loss" in names
    lines = plot.findall(f"{SVG}polyline")
    assert len(lines) == 2 and all(len(p.get("points").split()) == 6 for p in lines)
    # the axis spans the lowest to the highest loss of the run
    losses = [e[s]["loss"] for e in result.history for s in ("train", "val")]
    assert f"{max(losses):.4g}" in names and f"{min(losses):.4g}" in names
    # the train curve falls: its last point sits lower on the page (a larger y) than its first
    train_line = lines[0].get("points").split()
    assert float(train_line[-1].split(",")[1]) > float(train_line[0].split(",")[1])


def test_the_notebook_redraws_a_few_times_a_second_and_the_plot_keeps_its_size(
        notebook, monkeypatch):
    from nodegraph.runtime import loss_plot as plot_module

    ticks = [0]

    def clock() -> float:  # each look at the clock "takes" 10 ms
        ticks[0] += 1
        return ticks[0] * 0.01

    monkeypatch.setattr("nodegraph.runtime.callbacks.progress.time.monotonic", clock)
    graph = nodegraph.load("examples/xor.json")
    nodegraph.train(graph, epochs=400, progress="notebook")
    seconds = ticks[0] * 0.01  # one redraw per 0.5 s at most, and the final one
    assert seconds > 4 and 3 <= len(notebook.updates) <= seconds / 0.5 + 2
    final = ET.fromstring(notebook.updates[-1])
    (line,) = final.find(f".//{SVG}svg").findall(f"{SVG}polyline")
    assert len(line.get("points").split()) == plot_module.MAX_POINTS  # thinned from 400
    pts = [(float(x), float(y)) for x, y in ((i, i * i) for i in range(1000))]
    kept = plot_module.thinned(pts)
    assert len(kept) == plot_module.MAX_POINTS and kept[0] == pts[0] and kept[-1] == pts[-1]


def test_a_stopped_run_says_so(notebook):
    class StopAfterTwo(Callback):
        def on_epoch_end(self, trainer) -> None:
            if trainer.state.epoch == 2:
                control.stop()

    control = nodegraph.RunControl()
    graph = nodegraph.load("examples/logistic_binary.json")
    graph.set_param("data", "batch_size", 16)
    nodegraph.train(graph, epochs=10, progress="notebook", control=control,
                    callbacks=[StopAfterTwo()])
    final = ET.fromstring(notebook.updates[-1])
    assert "stopped" in final.find(".//span").text
    assert float(final.find(".//progress").get("value")) < 0.3


def test_the_choice_of_display():
    assert mode_of(False) is None and mode_of(None) is None
    assert mode_of(True) == "text"  # no kernel here
    assert mode_of("notebook") == "notebook"
    graph = nodegraph.load("examples/xor.json")
    with pytest.raises(NodegraphError, match=r"progress='bar': use True, False, or one of"):
        nodegraph.train(graph, epochs=1, progress="bar")


def test_notebook_progress_without_ipython_says_what_to_do(monkeypatch):
    monkeypatch.setitem(sys.modules, "IPython", None)  # not installed
    monkeypatch.setitem(sys.modules, "IPython.display", None)
    graph = nodegraph.load("examples/xor.json")
    with pytest.raises(NodegraphError, match="progress='notebook' needs IPython.*'text'"):
        nodegraph.train(graph, epochs=1, progress="notebook")


def test_the_loss_plot_scales_and_skips_what_it_cannot_draw():
    svg = ET.fromstring(loss_plot({"train loss": [(1, 10.0), (2, 1.0), (3, 0.01),
                                                  (4, float("nan"))]}))
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert "epoch" in texts and "10" in texts and "0.01" in texts
    (scale,) = [t for t in svg.iter(f"{SVG}text") if t.text == "log scale"]
    assert scale.get("class") == "y-scale" and "rotate(-90" in scale.get("transform")
    (line,) = svg.iter(f"{SVG}polyline")
    ys = [float(p.split(",")[1]) for p in line.get("points").split()]
    assert len(ys) == 3  # the NaN left out
    assert ys[2] - ys[1] == pytest.approx(2 * (ys[1] - ys[0]), abs=0.2)  # 1 and 2 decades
    empty = ET.fromstring(loss_plot({}))
    assert "no numbers yet" in "".join(empty.itertext())
