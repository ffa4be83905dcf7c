"""A NodegraphError in a real Jupyter kernel shows its message, where in the graph, and the
cell's line, not the frames inside nodegraph (`NodegraphError._render_traceback_`); other
exceptions keep IPython's full traceback, and so does SHORT_TRACEBACKS = False."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nodegraph.model.errors import NodegraphError, NodeRuntimeError, Problem, ValidationError

pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_the_short_display_holds_the_message_node_and_port():
    e = ValidationError([Problem("linear", "input", "shape_mismatch", "takes (N, 2)")])
    lines = [ANSI.sub("", line) for line in e._render_traceback_()]
    assert lines[0] == "ValidationError: the graph has 1 problem(s):"
    assert lines[1] == "  linear.input: takes (N, 2)"
    run = NodeRuntimeError("bce", "NaN loss")
    assert "NodeRuntimeError: node 'bce': NaN loss" in ANSI.sub("", run._render_traceback_()[0])
    bare = NodegraphError("x")
    bare.node = "data"  # type: ignore[attr-defined]
    assert "at node 'data'" in bare._render_traceback_()


@pytest.mark.slow
def test_a_kernel_shows_a_nodegraph_error_in_a_few_lines(tmp_path):
    from tests.test_notebook_kernel import Kernel

    k = Kernel(tmp_path)
    try:
        k.run("import nodegraph, numpy as np\n"
              f"g = nodegraph.load({str(ROOT / 'examples' / 'logistic_binary.json')!r})\n"
              "m = nodegraph.fit(g, epochs=1)")
        _, outputs = k.collect(k.send("m.predict(np.zeros((5, 3)))"))
        (error,) = [o for o in outputs if o["type"] == "error"]
        assert error["ename"] == "NodegraphError"
        shown = [ANSI.sub("", line) for line in error["traceback"]]
        assert len(shown) <= 4, shown
        assert shown[0].startswith("NodegraphError: predict: data.Moons 'data' port 'x': the "
                                   "model takes samples shaped (2,), got (3,)")
        assert any("m.predict(np.zeros((5, 3)))" in line for line in shown), shown
        assert not any("nodegraph/interop" in line for line in shown)

        # a graph's problems: one line each, with node and port
        _, outputs = k.collect(k.send(
            "g.set_param('linear', 'out_features', 3)\nnodegraph.fit(g, epochs=1)"))
        (error,) = [o for o in outputs if o["type"] == "error"]
        shown = [ANSI.sub("", line) for line in error["traceback"]]
        assert error["ename"] == "ValidationError" and len(shown) < 8, shown
        assert any(line.strip().startswith("bce.") or "bce" in line for line in shown[1:])

        # the full traceback on request, and for other errors
        # (replies are read by message, not status: the shell channel's lag behind errors)
        _, outputs = k.collect(k.send("import nodegraph.model.errors as e\n"
                                      "e.SHORT_TRACEBACKS = False"))
        assert not [o for o in outputs if o["type"] == "error"]
        _, outputs = k.collect(k.send("m.predict(np.zeros((5, 3)))"))
        (error,) = [o for o in outputs if o["type"] == "error"]
        full = ANSI.sub("", "\n".join(error["traceback"]))
        assert "nodegraph/interop/predict.py" in full and "Traceback" in full
    finally:
        k.close()
