"""The table journey, as a user makes it (issue #32): a Parquet file → `nodegraph run` with
`--metrics-out -` and `--save-model` → `nodegraph.load_model` → predictions on raw rows
(a DataFrame, text columns and all) → the ONNX file on the same rows: equal to 1e-5."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nodegraph

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # a training run in a process of its own, ONNX


def test_parquet_to_run_to_saved_model_to_raw_rows_to_onnx(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    ort = pytest.importorskip("onnxruntime")
    spec = importlib.util.spec_from_file_location("make_data", ROOT / "examples" / "make_data.py")
    make_data = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_data)
    make_data.write_parquet(tmp_path / "data", n=1200)
    shutil.copy(ROOT / "examples" / "parquet_churn.json", tmp_path / "churn.json")

    proc = subprocess.run([sys.executable, "-m", "nodegraph", "run", "churn.json", "--epochs",
                           "4", "--metrics-out", "-", "--save-model", "churn.ngz"],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads(proc.stdout)  # stdout holds the JSON alone
    assert len(metrics["history"]) == 4
    assert metrics["final"]["test"]["accuracy"] > 0.7  # churn is ~1/3 of the rows
    assert "model saved to churn.ngz" in proc.stderr

    model = nodegraph.load_model(tmp_path / "churn.ngz")
    assert model.evaluate("test")["accuracy"] == pytest.approx(
        metrics["final"]["test"]["accuracy"], abs=1e-6)
    rows = pq.read_table(tmp_path / "data" / "customers.parquet").to_pandas().sample(
        200, random_state=0)  # raw rows, as a user holds them: text columns, the target too
    predicted = model.predict(rows).numpy()
    model.export("onnx", tmp_path / "churn.onnx")
    session = ort.InferenceSession(str(tmp_path / "churn.onnx"))
    name = session.get_inputs()[0].name
    by_onnx = session.run(None, {name: model.table_rows(rows)})[0]
    assert np.abs(by_onnx - predicted).max() <= 1e-5
    truth = (rows["churn"] == "yes").to_numpy().astype(int)
    assert (predicted.argmax(1) == truth).mean() > 0.7
