"""`nodegraph run --save-model FILE.ngz`: the headless run ends with the model file that
`nodegraph.load_model` reads, holding what the run trained."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

import nodegraph
from nodegraph.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
XOR = str(ROOT / "examples" / "xor.json")


def test_run_writes_the_model_it_trained(tmp_path):
    out = tmp_path / "xor.ngz"
    proc = subprocess.run([sys.executable, "-m", "nodegraph", "run", XOR,
                           "--epochs", "30", "--seed", "3", "--threads", "1", "--quiet",
                           "--save-model", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"model saved to {out}" in proc.stderr
    model = nodegraph.load_model(out)
    assert model.epochs == 30
    same = nodegraph.fit(nodegraph.load(ROOT / "examples/xor.json"), epochs=30, seed=3, threads=1)
    x = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    assert torch.allclose(model.predict(x), same.predict(x), atol=1e-6)


# The two below call the CLI's `main` in this process: the run above already starts the
# console command as a user does, and an interpreter start-up costs more than these runs.
def test_an_unwritable_model_path_fails_before_training(tmp_path, capsys):
    (tmp_path / "file").write_text("not a folder")
    code = main(["run", XOR, "--save-model", str(tmp_path / "file" / "x.ngz")])
    printed = capsys.readouterr()
    assert code != 0 and "--save-model" in printed.err
    assert "epoch" not in printed.out and "CPU thread" not in printed.err


def test_a_missing_folder_is_made(tmp_path, capsys):
    out = tmp_path / "new" / "deeper" / "xor.ngz"
    code = main(["run", XOR, "--epochs", "2", "--quiet", "--save-model", str(out)])
    assert code == 0, capsys.readouterr().err[-3000:]
    assert nodegraph.load_model(out).epochs == 2
