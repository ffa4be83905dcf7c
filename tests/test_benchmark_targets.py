"""The speed targets, held by a CI step of their own (`make bench-targets`, run serially:
under `-n 2` the other worker's tests moved the whole-run ratio from 0.99 to 1.27):
`benchmarks/scale.py` and `benchmarks/overhead.py` run as a user runs them, and fail as
ratios to PyTorch by hand on the same machine (so a slower CI machine moves both sides),
with a noise allowance.

The allowances are the spread measured on a 2-core machine shared by other jobs (load 13
to 19, CPU clock, overhead.py --rounds 100 --runs 5 --threads 1, the same code run twice):
the MLP step ratio moved by 0.035, the CNN step ratio by 0.09, the whole-run ratio by 0.14.
The step and whole-run ratios are held to issue 35's targets. On a quiet machine, serial,
the whole-run ratio over 5 runs read 0.97, 1.55 and 1.25 in three runs of the same code;
over 11 runs (used here) 1.05, 1.07 and 1.01; the step ratios 1.01 to 1.03. scale.py's
compile/by hand and build share were held at 1.65 and 0.169 (their level when compile and
by hand were timed apart, each collecting the other's garbage: CI once read 2.01 where the
same code reads 0.97-1.60). Timed interleaved after an untimed collection, five runs at
load 1-5 read compile/by hand 1.22-1.47 (+0.16 to +0.25 s) and build 0.054-0.092 s; the
bounds are kept where they were, so a regression of ~30 % still fails.
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
# scale.py, 5,000-node chain, as shares of the same layers and Adam made by hand: the
# levels measured on a quiet machine (the targets, build 0.1 / 0.647 and compile
# (0.647 + 0.25) / 0.647, are not met yet)
BUILD_SHARE, COMPILE_RATIO, SCALE_NOISE = 0.169, 1.65, 0.15
# CI machines read compile/by hand 1.95 and 2.01 (validation there ~50 % slower than here,
# PyTorch's construction ~17 %) where a quiet run here reads 1.41-1.47: the compile check
# allows that spread; a regression of the kind it guards against (compile 2.4-3.0 s before
# the per-node work was taken out: a ratio near 4) still fails it
COMPILE_NOISE = 0.45


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
@pytest.mark.benchmark
def test_overhead_within_its_targets():
    out = run("benchmarks/overhead.py", "--rounds", "150", "--runs", "11", "--clock", "cpu",
              "--threads", "1")
    step = number(r"step_ratio: ([\d.]+) \(MLP\)", out)
    cnn = number(r"cnn step_ratio: ([\d.]+)", out)
    train = number(r"train_ratio: ([\d.]+)", out)
    assert step <= STEP_TARGET + STEP_NOISE, out
    assert cnn <= STEP_TARGET + STEP_NOISE, out
    assert train <= TRAIN_TARGET + TRAIN_NOISE, out


@pytest.mark.slow
@pytest.mark.benchmark
def test_scale_within_its_targets():
    out = run("benchmarks/scale.py", "--sizes", "1000", "5000", "--shapes", "chain",
              "--repeat", "3", "--clock", "cpu")
    hand = number(r"chain by hand: ([\d.]+) s at 5000 nodes", out)
    build = number(r"chain\s+5000 nodes: build ([\d.]+) s", out)
    ratio = number(r"compile/by hand ([\d.]+)", out)
    assert build <= BUILD_SHARE * hand * (1 + SCALE_NOISE), out
    assert ratio <= COMPILE_RATIO * (1 + COMPILE_NOISE), out
