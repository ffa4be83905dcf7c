"""The Python API in a real Jupyter kernel: fit, the kernel's interrupt mid-run, fit on,
predict on the test split, save, load in a fresh kernel, the same predictions; the cells'
outputs are short reprs and a summary table.

The kernels are ipykernel's, started and interrupted by jupyter_client (what nbclient and
a notebook's Stop button use: SIGINT to the kernel process).
"""

from __future__ import annotations

import json
import os
import queue
import sys
import time
from pathlib import Path

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # two kernels, each importing torch: 20-60 s


class Kernel:
    """One kernel; `run` executes a cell and returns its reply and output messages."""

    def __init__(self, cwd: Path):
        self.km = jupyter_client.KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=str(cwd), env={**os.environ, "PYTHONPATH": str(ROOT)})
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)
        self.run(f"import sys; sys.path.insert(0, {str(ROOT)!r})")

    def send(self, code: str) -> str:
        return self.kc.execute(code)

    def collect(self, msg_id: str, timeout: float = 300, until=None) -> tuple[dict, list]:
        """The outputs of cell `msg_id` until it is idle (or until `until(msg)` is true:
        then returns (None-reply, outputs so far))."""
        outputs: list[dict] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=1)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind in ("execute_result", "display_data", "update_display_data", "stream",
                        "error"):
                outputs.append({"type": kind, **msg["content"]})
                if until is not None and until(outputs[-1]):
                    return {}, outputs
            if kind == "status" and msg["content"]["execution_state"] == "idle":
                reply = self.kc.get_shell_msg(timeout=30)
                return reply["content"], outputs
        raise AssertionError(f"the cell did not finish in {timeout} s: {outputs[-3:]}")

    def run(self, code: str, timeout: float = 300) -> list[dict]:
        reply, outputs = self.collect(self.send(code), timeout)
        errors = [o for o in outputs if o["type"] == "error"]
        assert reply.get("status") == "ok" and not errors, (code, errors or reply)
        return outputs

    def result(self, code: str) -> dict:
        """The execute_result data (mimetype -> text) of a one-expression cell."""
        (out,) = [o for o in self.run(code) if o["type"] == "execute_result"]
        return out["data"]

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture
def kernels(tmp_path):
    opened: list[Kernel] = []

    def start() -> Kernel:
        k = Kernel(tmp_path)
        opened.append(k)
        return k

    yield start
    for k in opened:
        k.close()


def test_fit_interrupt_continue_predict_save_and_load_in_real_kernels(kernels, tmp_path):
    assert sys.executable  # the kernel is ipykernel's python3: this venv's interpreter
    k = kernels()
    k.run("import nodegraph, numpy as np, torch\n"
          f"g = nodegraph.load({str(ROOT / 'examples' / 'logistic_binary.json')!r})\n"
          "g.set_param('data', 'batch_size', 8)\n"  # many steps: an interrupt lands mid-run
          "m = nodegraph.fit(g, epochs=2)")
    shown = k.result("m")
    assert len(shown["text/plain"]) < 200 and "2 epoch(s)" in shown["text/plain"]
    assert "<table" in shown["text/html"]

    # a long fit with the live display, stopped by the kernel's interrupt once it draws
    cell = k.send("r = m.fit(epochs=100000, progress=True)\nr")
    _, so_far = k.collect(cell, until=lambda o: o["type"] == "update_display_data")
    assert so_far, "the progress display never updated"
    k.km.interrupt_kernel()
    reply, outputs = k.collect(cell)
    assert reply["status"] == "ok", reply  # the run ended cleanly, not with a traceback
    (result,) = [o for o in outputs if o["type"] == "execute_result"]
    assert "cancelled" in result["data"]["text/plain"]
    assert len(result["data"]["text/plain"]) < 300
    last_html = [o for o in outputs if o["type"] == "update_display_data"][-1]
    assert "stopped" in last_html["data"]["text/html"]
    state = json.loads(k.result("import json; json.dumps([m.cancelled, m.epochs])")
                       ["text/plain"].strip("'"))
    assert state[0] is True and 2 <= state[1] < 100002
    done = state[1]

    k.run("r2 = m.fit(epochs=3)")
    assert json.loads(k.result("json.dumps([m.cancelled, m.epochs, "
                               "[h['epoch'] for h in m.history][-3:]])")["text/plain"]
                      .strip("'")) == [False, done + 3, [done + 1, done + 2, done + 3]]
    table = k.result("m.summary()")
    assert "<table" in table["text/html"] and "params" in table["text/plain"]
    assert "linear" in table["text/plain"]
    k.run(f"p = m.predict('test')\nnp.save({str(tmp_path / 'p.npy')!r}, p.numpy())\n"
          f"m.save({str(tmp_path / 'run.ngz')!r})")
    for expr in ("g", "r2", "nodegraph.validate(g)"):
        text = k.result(expr)["text/plain"]
        assert len(text) < 300, (expr, text)

    fresh = kernels()
    fresh.run("import nodegraph, numpy as np, torch\n"
              f"m = nodegraph.load_model({str(tmp_path / 'run.ngz')!r})\n"
              f"same = np.array_equal(m.predict('test').numpy(), "
              f"np.load({str(tmp_path / 'p.npy')!r}))")
    assert fresh.result("same")["text/plain"] == "True"
    assert f"{done + 3} epoch(s)" in fresh.result("m")["text/plain"]
