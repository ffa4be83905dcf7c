"""The same two-moons workflow in nodegraph, Keras 3 and Lightning (validation, early
stopping, a checkpoint, evaluate, predict 7 new rows, save, reload): runs each script in a
fresh folder and counts its lines (code lines: not blank; the README's comparison).

    python benchmarks/side_by_side/run.py [PYTHON_FOR_KERAS_AND_LIGHTNING]

Keras and Lightning are not nodegraph's dependencies: give an interpreter that has them
(a venv made with --system-site-packages, so it shares this torch); without one only the
line counts of their scripts are printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPTS = {"nodegraph": "moons_nodegraph.py", "Keras 3": "moons_keras.py",
           "Lightning": "moons_lightning.py"}


def code_lines(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def main() -> None:
    other = sys.argv[1] if len(sys.argv) > 1 else None
    for name, script in SCRIPTS.items():
        python = sys.executable if name == "nodegraph" else other
        lines = code_lines(HERE / script)
        if python is None:
            print(f"{name:10} {lines:3} lines  (not run: no interpreter given)")
            continue
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            done = subprocess.run([python, str(HERE / script)], cwd=folder, text=True,
                                  capture_output=True, timeout=1200,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
            seconds = time.perf_counter() - start
        if done.returncode:
            print(f"{name:10} {lines:3} lines  FAILED\n{done.stderr[-2000:]}")
            continue
        printed = " | ".join(done.stdout.strip().splitlines()[-2:])
        print(f"{name:10} {lines:3} lines  {seconds:5.1f} s  {printed}")


if __name__ == "__main__":
    main()
