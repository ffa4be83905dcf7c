"""Data-parallel training: two gloo processes under torchrun follow the single-process run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nodegraph.cli import _without_option


def run(tmp_path, name, *args):
    out = tmp_path / f"{name}.json"
    proc = subprocess.run([sys.executable, "-m", "nodegraph", "run", *args, "--quiet",
                           "--metrics-out", str(out)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(out.read_text())


# The digits CNN in a quick mode: two epochs (its 60 would cost minutes on CI), and no
# dropout, because each rank draws its own dropout masks (seed + rank), so with dropout the
# two runs agree only in distribution, not to float tolerance. Its 1259 training images in
# batches of 32 end with an odd batch of 11, split 6 + 5.
CNN_QUICK = ["--epochs", "2", "--set", "dropout.p=0.0"]


@pytest.mark.parametrize("graph, extra", [
    ("examples/line_fit.json", ["--epochs", "4", "--set", "data.batch_size=25"]),  # uneven shards
    ("examples/xor.json", ["--epochs", "150"]),
    ("examples/cnn_digits.json", CNN_QUICK),
])
def test_two_processes_match_one(tmp_path, graph, extra):
    single = run(tmp_path, "single", graph, *extra)
    double = run(tmp_path, "double", graph, *extra, "--nproc", "2")
    final = single["final"]
    if "accuracy" in final["train"]:  # it learned, so agreeing is no matter of chance
        assert final.get("test", final["train"])["accuracy"] > 0.85
    assert len(single["history"]) == len(double["history"])
    for a, b in zip(single["history"], double["history"], strict=True):
        for split in ("train", "val"):
            for key, value in a[split].items():
                assert b[split][key] == pytest.approx(value, rel=1e-4, abs=1e-6), (split, key)
    for split, stats in single["final"].items():
        for key, value in stats.items():
            assert double["final"][split][key] == pytest.approx(value, rel=1e-4, abs=1e-6)


def test_nproc_is_removed_before_torchrun_starts_the_workers():
    assert _without_option(["run", "g.json", "--nproc", "2", "--quiet"], "--nproc") == [
        "run", "g.json", "--quiet"]
    assert _without_option(["run", "--nproc=4", "g.json"], "--nproc") == ["run", "g.json"]
