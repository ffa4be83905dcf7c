"""`fit`, `evaluate` and `predict` on the caller's own data (issue #35, item 1): numpy
arrays, torch tensors, pandas frames, mappings, torch datasets, `validation_data`, the data
block's own splits and scaling, data.Arrays for a graph without data of its own, and the
shape checks that name the block, the port and both shapes."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import nodegraph
from nodegraph.model.errors import NodegraphError


def moons_graph():
    return nodegraph.load("examples/logistic_binary.json")  # z-scored, val and test split


def arrays(n=120, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(2.0, 3.0, size=(n, 2)).astype(np.float32)
    y = (x[:, 0] - x[:, 1] > 0).astype(np.float32)[:, None]
    return x, y


def train_losses(m):
    return [h["train"]["loss"] for h in m.history]


def npy_graph(tmp_path, x, y):
    """The moons graph with its data block swapped for data.NumPy over x and y, with the
    same split and scaling params as the moons block."""
    np.savez(tmp_path / "d.npz", x=x, y=y)
    g = moons_graph()
    p = dict(g.nodes["data"].params)
    g.remove("data")
    keep = {k: p[k] for k in ("val_fraction", "test_fraction", "batch_size", "normalize")}
    g.folder = tmp_path  # its data beside it, as a graph file's
    g.add("data.NumPy", "data", path="d.npz", **keep)
    for dst in (("linear", "input"),):
        g.connect(("data", "x"), dst)
    for dst in (("bce", "target"), ("accuracy", "target"), ("ece", "target")):
        g.connect(("data", "y"), dst)
    return g


def test_arrays_train_exactly_as_the_same_arrays_from_a_file(tmp_path):
    x, y = arrays()
    from_file = nodegraph.fit(npy_graph(tmp_path, x, y), epochs=5)
    from_arrays = nodegraph.fit(npy_graph(tmp_path, x[:3] * 0, y[:3]), x=x, y=y, epochs=5)
    # the block's own split (0.2 val, 0.2 test), z-scoring and batching, bit for bit
    assert train_losses(from_arrays) == train_losses(from_file)
    assert [h["val"]["loss"] for h in from_arrays.history] == \
        [h["val"]["loss"] for h in from_file.history]
    assert from_arrays.evaluate("test") == from_file.evaluate("test")


def test_every_form_of_the_same_data_trains_the_same():
    pd = pytest.importorskip("pandas")
    x, y = arrays()
    want = train_losses(nodegraph.fit(moons_graph(), x=x, y=y, epochs=3))
    forms = [
        dict(x=torch.as_tensor(x), y=torch.as_tensor(y)),
        dict(x=pd.DataFrame(x, columns=["a", "b"]), y=pd.Series(y[:, 0])),
        dict(x={"x": x}, y={"data.y": y}),
        dict(x=x.astype(np.float64), y=y[:, 0].astype(np.int64)),  # (N,) read as (N, 1)
        dict(x=torch.utils.data.TensorDataset(torch.as_tensor(x), torch.as_tensor(y))),
        dict(x=torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.as_tensor(x), torch.as_tensor(y)),
            batch_size=7)),
    ]
    for form in forms:
        assert train_losses(nodegraph.fit(moons_graph(), epochs=3, **form)) == want, form


def test_validation_data_is_the_val_split_and_scaling_is_fitted_on_x_only():
    x, y = arrays()
    xv, yv = arrays(40, seed=5)
    m = nodegraph.fit(moons_graph(), x=x, y=y, validation_data=(xv, yv), epochs=4)
    ds = m.compiled.datasets["data"]
    assert ds.size("train") == 120 and ds.size("val") == 40 and not ds.has("test")
    stats = ds.normalization["x"]
    np.testing.assert_allclose(stats["centre"].numpy(), x.mean(0), rtol=1e-5)
    np.testing.assert_allclose(stats["scale"].numpy(), x.std(0), rtol=1e-5)
    # evaluating the validation arrays gives the last epoch's val figures
    last = m.history[-1]["val"]
    got = m.evaluate(x=xv, y=yv)
    assert got["loss"] == pytest.approx(last["loss"], rel=1e-6)
    assert got["accuracy"] == pytest.approx(last["accuracy"])
    # predict takes raw rows and scales them as training did
    logits = m.predict(xv[:7])
    z = (torch.as_tensor(xv[:7]) - stats["centre"]) / stats["scale"]
    w = m.weights()
    torch.testing.assert_close(logits, z @ w["linear.weight"].T + w["linear.bias"])


def test_fit_on_new_arrays_continues_the_model_with_its_scaling():
    x, y = arrays()
    m = nodegraph.fit(moons_graph(), x=x, y=y, epochs=2)
    centre = m.compiled.datasets["data"].normalization["x"]["centre"].clone()
    x2, y2 = arrays(80, seed=3)
    m.fit(x2, y2, epochs=2, batch_size=16)
    assert m.epochs == 4
    ds = m.compiled.datasets["data"]
    assert torch.equal(ds.normalization["x"]["centre"], centre)  # the model's, not refitted
    assert ds.batch_size == 16 and ds.size("train") + ds.size("val") + ds.size("test") == 80
    assert m.fit(3).history[-1]["epoch"] == 7  # fit(3) is fit(epochs=3), as before


def inputs_graph():
    """A graph with no data of its own: data.Arrays declares one sample's shape."""
    g = nodegraph.Graph("arrays")
    g.add("data.Arrays", "inputs", x_shape=[3], target_kind="class", normalize="zscore",
          batch_size=8)
    g.add("layers.Linear", "linear", out_features=4)
    g.add("losses.CrossEntropy", "ce")
    g.add("optimizers.Adam", "opt", lr=0.05)
    g.connect(("inputs", "x"), ("linear", "input"))
    g.connect(("linear", "output"), ("ce", "input"))
    g.connect(("inputs", "y"), ("ce", "target"))
    g.connect(("ce", "loss"), ("opt", "loss"))
    return g


def test_a_graph_declaring_its_inputs_by_shape_validates_fits_saves_and_loads(tmp_path):
    g = inputs_graph()
    report = nodegraph.validate(g)
    assert report.ok and report.shape("linear", "output")[1:] == (4,)
    with pytest.raises(NodegraphError, match="takes arrays from Python"):
        nodegraph.fit(g, epochs=1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3)).astype(np.float32)
    y = rng.integers(0, 4, 64)
    m = nodegraph.fit(g, x=x, y=y, epochs=3, validation_data=(x[:16], y[:16]))
    assert m.epochs == 3 and "val" in m.history[-1]
    m.save(tmp_path / "m.ngz")
    back = nodegraph.load_model(tmp_path / "m.ngz")
    torch.testing.assert_close(back.predict(x[:7]), m.predict(x[:7]))
    with pytest.raises(NodegraphError, match=r"data.Arrays 'inputs' port 'x': the graph takes "
                       r"samples shaped \(3,\), got \(5,\) \(the array is \(64, 5\)\)"):
        nodegraph.fit(inputs_graph(), x=np.zeros((64, 5)), y=y, epochs=1)
    with pytest.raises(NodegraphError, match="whole numbers"):
        nodegraph.fit(inputs_graph(), x=x, y=y + 0.5, epochs=1)


@pytest.mark.parametrize("weighed", [False, True])
def test_a_model_fitted_on_arrays_exports_to_python_and_onnx(tmp_path, weighed):
    """The exporters compile the graph again: on the model's own data, not the block's (a
    data.Arrays block has none, and export failed), scaled as fitted."""
    from tests.test_preprocess import exported_class, onnx_session

    rng = np.random.default_rng(1)
    x = rng.normal(5.0, 3.0, size=(64, 3)).astype(np.float32)  # far from z-scored
    y = rng.integers(0, 4, 64)
    weights = rng.uniform(0.5, 2.0, 64) if weighed else None
    m = nodegraph.fit(inputs_graph(), x=x, y=y, epochs=2, sample_weight=weights)
    want = m.predict(x[:9])
    m.export("onnx", tmp_path / "m.onnx")
    got = onnx_session(tmp_path / "m.onnx").run(None, {"x": x[:9]})[0]
    assert np.abs(got - want.numpy()).max() < 1e-5
    result = m.export("python", tmp_path / "arrays_model.py")
    assert result.trains and result.npz is not None
    with torch.no_grad():
        torch.testing.assert_close(exported_class(tmp_path / "arrays_model.py")(
            torch.from_numpy(x[:9])), want, atol=1e-5, rtol=1e-5)
    saved = np.load(result.npz)
    assert sorted(saved.files) and not any("sample_weight" in f for f in saved.files)


def test_the_same_graph_file_still_runs_on_its_own_data_from_the_cli(tmp_path):
    x, y = arrays()
    g = npy_graph(tmp_path, x, y)
    nodegraph.fit(g, x=x[:50] * 2, y=y[:50], epochs=1)  # the caller's graph is untouched
    nodegraph.save(g, tmp_path / "g.json")
    assert json.loads((tmp_path / "g.json").read_text())["nodes"]["data"]["params"]["path"]
    out = subprocess.run([sys.executable, "-m", "nodegraph", "run", str(tmp_path / "g.json"),
                          "--epochs", "1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr


def test_shape_and_form_errors_name_the_block_the_port_and_both_shapes():
    x, y = arrays()
    m = nodegraph.fit(moons_graph(), x=x, y=y, epochs=1)
    with pytest.raises(NodegraphError, match=r"predict: data.Moons 'data' port 'x': the model "
                       r"takes samples shaped \(2,\), got \(3,\) \(the array is \(5, 3\)\)"):
        m.predict(np.zeros((5, 3)))
    with pytest.raises(NodegraphError, match=r"fit: data.Moons 'data' port 'x': the graph takes"
                       r" samples shaped \(2,\), got \(3,\)"):
        nodegraph.fit(moons_graph(), x=np.zeros((5, 3)), y=y[:5], epochs=1)
    with pytest.raises(NodegraphError, match="different numbers of samples"):
        nodegraph.fit(moons_graph(), x=x, y=y[:10], epochs=1)
    with pytest.raises(NodegraphError, match="has no port 'z'"):
        nodegraph.fit(moons_graph(), x={"z": x}, y=y, epochs=1)
    with pytest.raises(NodegraphError, match="takes numbers"):
        nodegraph.fit(moons_graph(), x=np.array([["a", "b"]] * 5), y=y[:5], epochs=1)
    with pytest.raises(NodegraphError, match=r"validation_data=\.\.\.\) takes \(x_val, y_val\)"):
        nodegraph.fit(moons_graph(), x=x, y=y, validation_data=x, epochs=1)
    with pytest.raises(NodegraphError, match="give the inputs and their targets"):
        m.evaluate(x=x)


def test_predict_takes_a_frame_a_tensor_and_a_torch_dataset():
    pd = pytest.importorskip("pandas")
    x, y = arrays()
    m = nodegraph.fit(moons_graph(), x=x, y=y, epochs=1)
    want = m.predict(x[:9])
    torch.testing.assert_close(m.predict(pd.DataFrame(x[:9])), want)
    torch.testing.assert_close(m.predict(torch.as_tensor(x[:9])), want)
    torch.testing.assert_close(m.predict({"x": x[:9]}), want)
    data = torch.utils.data.TensorDataset(torch.as_tensor(x[:9]), torch.as_tensor(y[:9]))
    torch.testing.assert_close(m.predict(data), want)
