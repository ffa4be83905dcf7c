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


def test_export_takes_a_saved_model_with_its_trained_weights(tmp_path, capsys):
    """`nodegraph export MODEL.ngz --to onnx|python|weights`: the model the run saved, as
    it predicts (its trained weights and fitted scaling), not the graph's fresh weights."""
    import numpy as np

    from tests.test_preprocess import exported_class, onnx_session

    saved = tmp_path / "xor.ngz"
    assert main(["run", XOR, "--epochs", "20", "--quiet", "--save-model", str(saved)]) == 0
    model = nodegraph.load_model(saved)
    x = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    want = model.predict(x)
    capsys.readouterr()
    assert main(["export", str(saved), "--to", "onnx", "-o", str(tmp_path / "m.onnx")]) == 0
    printed = capsys.readouterr().out
    assert "trained, from" in printed and "(20 epochs)" in printed and "UNTRAINED" not in printed
    got = onnx_session(tmp_path / "m.onnx").run(None, {"x": x.numpy()})[0]
    assert np.abs(got - want.numpy()).max() < 1e-5
    assert main(["export", str(saved), "--to", "python", "-o", str(tmp_path / "m.py")]) == 0
    with torch.no_grad():
        torch.testing.assert_close(exported_class(tmp_path / "m.py")(x), want, atol=1e-5,
                                   rtol=1e-5)
    assert main(["export", str(saved), "--to", "weights", "-o",
                 str(tmp_path / "w.safetensors")]) == 0
    from safetensors.torch import load_file

    weights = load_file(tmp_path / "w.safetensors")
    assert all(torch.equal(weights[k], v) for k, v in model.weights().items())


def test_export_of_a_saved_model_refuses_what_would_change_it(tmp_path, capsys):
    saved = tmp_path / "xor.ngz"
    assert main(["run", XOR, "--epochs", "1", "--quiet", "--save-model", str(saved)]) == 0
    capsys.readouterr()
    code = main(["export", str(saved), "--to", "onnx", "-o", str(tmp_path / "m.onnx"),
                 "--train", "--set", "training.epochs=3"])
    err = capsys.readouterr().err
    assert code != 0 and "--train, --set cannot be used with a saved model" in err
    assert not (tmp_path / "m.onnx").exists()
    (tmp_path / "bad.ngz").write_bytes(b"PK\x03\x04 not a model")
    code = main(["export", str(tmp_path / "bad.ngz"), "--to", "onnx", "-o",
                 str(tmp_path / "b.onnx")])
    err = capsys.readouterr().err
    assert code != 0 and "bad.ngz" in err and "Traceback" not in err
