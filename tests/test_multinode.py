"""`nodegraph run --nnodes N --node-rank R --rdzv HOST:PORT`: two "machines" on 127.0.0.1.

Two separate `nodegraph run` processes, one per node, meet at a port picked free at run
time, train a streamed image folder (each rank reading only its share of every batch) and
end with the numbers of the one-process run. Given folders of different sizes, both stop
naming the data block instead of training on data that disagree.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import nodegraph
from nodegraph.cli.main import main
from nodegraph.model.graph import Graph

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1",
       "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
BUDGET_S = 240


def _write_folder(root: Path, per_class: int) -> Path:
    spec = importlib.util.spec_from_file_location("make_shapes_jpegs",
                                                  ROOT / "examples" / "make_shapes_jpegs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_folder(root, per_class=per_class, seed=1, size=(16, 16))


def _graph_file(tmp_path: Path, folder: Path) -> Path:
    g = Graph("two-nodes")
    g.add("data.ImageFolder", id="data", path=str(folder), batch_size=7, val_fraction=0.25,
          storage="stream")
    g.add("augment.HorizontalFlip", id="flip")  # random: seeded per sample, on any rank
    g.connect(("flip", "transform"), ("data", "augment"))
    g.add("layers.Flatten", id="flat")
    g.add("layers.Linear", id="out", out_features=4)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.SGD", id="opt", lr=0.05)
    g.connect(("data", "x"), ("flat", "input"))
    g.connect(("flat", "output"), ("out", "input"))
    g.connect(("out", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.update_training({"epochs": 2, "seed": 0, "workers": 0})
    path = tmp_path / "two_nodes.json"
    nodegraph.save(g, path)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(*args: str, out: Path | None = None) -> subprocess.Popen:
    tail = ["--quiet", "--metrics-out", str(out)] if out else ["--quiet"]
    return subprocess.Popen([sys.executable, "-m", "nodegraph", "run", *args, *tail],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV, start_new_session=True)


def _finish(procs: list[subprocess.Popen], deadline: float) -> list[tuple[int, str]]:
    out = []
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, 9)
            pytest.fail("a node ran past the test's budget")
        out.append((proc.returncode, err))
    return out


def test_two_nodes_on_localhost_give_the_one_process_result(tmp_path):
    deadline = time.monotonic() + BUDGET_S
    path = _graph_file(tmp_path, _write_folder(tmp_path / "shapes", 9))
    single = tmp_path / "single.json"
    [(code, err)] = _finish([_start(str(path), out=single)], deadline)
    assert code == 0, err[-4000:]
    rdzv = f"127.0.0.1:{_free_port()}"
    nodes = [_start(str(path), "--nnodes", "2", "--node-rank", str(r), "--rdzv", rdzv,
                    out=tmp_path / f"node{r}.json") for r in (0, 1)]
    for code, err in _finish(nodes, deadline):
        assert code == 0, err[-4000:]
    one, two = json.loads(single.read_text()), json.loads((tmp_path / "node0.json").read_text())
    assert not (tmp_path / "node1.json").exists()  # only rank 0 writes
    assert len(one["history"]) == len(two["history"]) == 2
    for a, b in zip(one["history"], two["history"], strict=True):
        for split in ("train", "val"):
            for key, value in a[split].items():
                assert b[split][key] == pytest.approx(value, rel=1e-4, abs=1e-6), (split, key)
    for split, stats in one["final"].items():
        for key, value in stats.items():
            assert two["final"][split][key] == pytest.approx(value, rel=1e-4, abs=1e-6)


def test_nodes_whose_folders_disagree_stop_naming_the_block(tmp_path):
    deadline = time.monotonic() + BUDGET_S
    path = _graph_file(tmp_path, _write_folder(tmp_path / "a", 6))
    other = _write_folder(tmp_path / "b", 7)
    rdzv = f"127.0.0.1:{_free_port()}"
    nodes = [_start(str(path), "--nnodes", "2", "--node-rank", str(r), "--rdzv", rdzv,
                    *(["--set", f"data.path={other}"] if r else [])) for r in (0, 1)]
    results = _finish(nodes, deadline)
    assert all(code != 0 for code, _ in results)
    assert any("data block 'data' has split sizes" in err for _, err in results), \
        results[0][1][-3000:]


def test_bad_node_options_are_refused_before_anything_starts(tmp_path, capsys):
    """In this process (the CLI's `main`): the refusal comes before torchrun would start, so
    three interpreter start-ups would only repeat what the test above already pays for."""
    path = _graph_file(tmp_path, _write_folder(tmp_path / "a", 2))
    for args, message in (([], "--node-rank must be given"),
                          (["--node-rank", "0", "--rdzv", "nowhere"], "--rdzv must be HOST:PORT"),
                          (["--node-rank", "2", "--rdzv", "h:1"], "0 to 1")):
        code = main(["run", str(path), "--nnodes", "2", *args])
        stderr = capsys.readouterr().err
        assert code != 0 and message in stderr, stderr[-2000:]
