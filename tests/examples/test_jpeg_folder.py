"""examples/jpeg_folder.json: a CNN learns shapes from a folder of generated JPEGs through
`nodegraph run`, with augmentation in 2 DataLoader workers.

The folder comes from `examples/make_shapes_jpegs.py` (photos of mixed sizes, four
classes told apart by shape, not colour). Quick mode: 100 photos per class, 8 epochs, in
the normal suite; the full recipe (500 per class, the file's 15 epochs) is marked slow.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import nodegraph

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "jpeg_folder.json"


def _write(root: Path, per_class: int) -> Path:
    spec = importlib.util.spec_from_file_location("make_shapes_jpegs",
                                                  ROOT / "examples" / "make_shapes_jpegs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_folder(root, per_class=per_class, seed=0)


def _run(tmp_path: Path, folder: Path, *extra: str) -> dict:
    out = tmp_path / "metrics.json"
    proc = subprocess.run([sys.executable, "-m", "nodegraph", "run", str(EXAMPLE), "--quiet",
                           "--set", f"data.path={folder}", "--data-root", str(folder),
                           "--metrics-out", str(out), *extra],
                          capture_output=True, text=True, timeout=1500,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def test_the_shipped_sample_validates_as_a_streamed_augmented_folder():
    report = nodegraph.validate(nodegraph.load(EXAMPLE), for_training=True)
    assert report.ok, report.problems
    assert report.shape("data", "x") == (32, 3, 32, 32)
    assert report.data["data"].streamed  # augmented: read in the workers every epoch
    assert report.data["data"].sizes == {"train": 40, "val": 8}


def test_quick_it_learns_the_shapes(tmp_path):
    folder = _write(tmp_path / "shapes", 100)
    metrics = _run(tmp_path, folder, "--epochs", "8")
    history = metrics["history"]
    assert history[-1]["train"]["loss"] < history[0]["train"]["loss"]
    assert metrics["final"]["val"]["accuracy"] > 0.5  # chance: 0.25


@pytest.mark.slow
def test_full_it_tells_the_shapes_apart(tmp_path):
    folder = _write(tmp_path / "shapes", 500)
    metrics = _run(tmp_path, folder)
    assert metrics["final"]["val"]["accuracy"] > 0.9
