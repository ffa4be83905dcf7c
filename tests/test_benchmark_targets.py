"""The slow tier holds the speed targets: `benchmarks/scale.py` and `benchmarks/overhead.py`
run as a user runs them, and fail on their own targets, as ratios to PyTorch by hand on the
same machine (so a slower CI machine moves both sides), with a noise allowance.

The allowances are the spread measured on a 2-core machine shared by other jobs (load 13
to 19, CPU clock, overhead.py --rounds 100 --runs 5 --threads 1, the same code run twice):
the MLP step ratio moved by 0.035, the CNN step ratio by 0.09, the whole-run ratio by 0.14.
At that load only a regression larger than the noise can fail; on a quieter CI machine the
allowances can shrink to a third. scale.py (best of 3, CPU clock) gave compile/by hand 1.56
at load 18 against 1.39 for the target's +0.25 s: the compile allowance is 15 %, and the
present code sits at its edge (issue 35 item 7 is not yet met).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

STEP_TARGET, STEP_NOISE = 1.02, 0.09  # overhead.py (a): one training step, graph / hand
TRAIN_TARGET, TRAIN_NOISE = 1.10, 0.14  # overhead.py (b): a whole run, graph / hand
# scale.py, 5,000-node chain, as shares of the same layers and Adam made by hand (0.647 s
# on the reference machine): build < 0.1 s, compile - by hand < 0.25 s
BUILD_SHARE, COMPILE_RATIO, SCALE_NOISE = 0.1 / 0.647, (0.647 + 0.25) / 0.647, 0.15


def run(*args: str) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=580, check=True)
    return out.stdout


def number(pattern: str, text: str) -> float:
    found = re.search(pattern, text)
    assert found, f"{pattern!r} not in the benchmark's output:\n{text}"
    return float(found[1])


@pytest.mark.slow
def test_overhead_within_its_targets():
    out = run("benchmarks/overhead.py", "--rounds", "150", "--runs", "5", "--clock", "cpu",
              "--threads", "1")
    step = number(r"step_ratio: ([\d.]+) \(MLP\)", out)
    cnn = number(r"cnn step_ratio: ([\d.]+)", out)
    train = number(r"train_ratio: ([\d.]+)", out)
    assert step <= STEP_TARGET + STEP_NOISE, out
    assert cnn <= STEP_TARGET + STEP_NOISE, out
    assert train <= TRAIN_TARGET + TRAIN_NOISE, out


@pytest.mark.slow
def test_scale_within_its_targets():
    out = run("benchmarks/scale.py", "--sizes", "1000", "5000", "--shapes", "chain",
              "--repeat", "3", "--clock", "cpu")
    hand = number(r"chain by hand: ([\d.]+) s at 5000 nodes", out)
    build = number(r"chain\s+5000 nodes: build ([\d.]+) s", out)
    ratio = number(r"compile/by hand ([\d.]+)", out)
    assert build <= BUILD_SHARE * hand * (1 + SCALE_NOISE), out
    assert ratio <= COMPILE_RATIO * (1 + SCALE_NOISE), out
