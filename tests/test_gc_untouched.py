"""The library leaves the process's cycle collector alone; only its entry points tune it.

A host program that imports nodegraph keeps its own garbage collection: a reference cycle
it made before its first `Graph` is freed by the next collection, and validation does not
switch the collector off. The CLI and the editor opt in (`gcpause.tune_process`). Each
check runs in a fresh interpreter, as other tests in this process may have called the CLI.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_a_cycle_made_before_the_first_graph_is_freed():
    out = _run("""
        import gc, weakref
        import nodegraph

        class Big:
            def __init__(self):
                self.data = bytearray(50_000_000)
                self.me = self  # a reference cycle: only the collector frees it

        big = Big()
        alive = weakref.ref(big)
        del big
        gc.disable()  # the cycle survives until a collection runs
        g = nodegraph.Graph()
        g.add("layers.Linear", out_features=2)
        nodegraph.validate(g)
        gc.enable()
        gc.collect()
        print(alive() is None, gc.get_freeze_count(), gc.isenabled())
    """)
    assert out == "True 0 True"


def test_validation_leaves_the_collector_on_and_an_entry_point_may_tune_it():
    out = _run("""
        import gc
        import nodegraph
        from nodegraph.model import gcpause

        seen = []
        g = nodegraph.Graph()
        g.add("layers.Linear", out_features=2)
        with gcpause.paused():
            seen.append(gc.isenabled())
        gcpause.tune_process()
        with gcpause.paused():
            seen.append(gc.isenabled())
        nodegraph.Graph()
        print(seen, gc.get_freeze_count() > 0)
    """)
    assert out == "[True, False] True"
