"""A model trained on a table with text columns (examples/parquet_churn.json) predicts from
the table's rows by column name: a pandas DataFrame, a pyarrow Table or a mapping, the
input columns picked, the text coded as the data block coded its files, the numbers scaled
as it scaled them; `Model.table_rows` gives the array the ONNX file takes, whose metadata
lists the columns and the codes. Also through a saved and loaded .ngz."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import nodegraph
from nodegraph.model.errors import NodegraphError

ROOT = Path(__file__).resolve().parents[1]
pq = pytest.importorskip("pyarrow.parquet")


def _make_data():
    spec = importlib.util.spec_from_file_location("make_data", ROOT / "examples" / "make_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The churn table (600 rows), the model trained 2 epochs, and its saved+loaded copy."""
    folder = tmp_path_factory.mktemp("churn")
    shutil.copy(ROOT / "examples" / "parquet_churn.json", folder)
    path = _make_data().write_parquet(folder / "data", n=600)
    assert path == folder / "data" / "customers.parquet"
    model = nodegraph.fit(nodegraph.load(folder / "parquet_churn.json"), epochs=2, device="cpu")
    loaded = nodegraph.load_model(model.save(folder / "churn.ngz"))
    return folder, model, loaded, pq.read_table(path).to_pandas()


@pytest.fixture(params=["trained", "loaded"])
def model(request, trained):
    return trained[1] if request.param == "trained" else trained[2]


def test_rows_are_coded_as_the_files_were(model, trained):
    table = trained[3]
    rows = table.head(40)
    array = model.table_rows(rows)
    assert array.dtype == np.float32 and array.shape == (40, 5)
    numbers = ["tenure", "monthly_price", "support_calls"]
    np.testing.assert_array_equal(array[:, :3], rows[numbers].to_numpy(np.float32))
    for k, column in enumerate(["plan", "region"], start=3):  # sorted distinct values, numbered
        codes = {v: i for i, v in enumerate(sorted(set(table[column])))}
        np.testing.assert_array_equal(array[:, k], [codes[v] for v in rows[column]])
    data = model._ready().datasets["data"]
    assert data.categories["plan"] == {"basic": 0, "plus": 1, "pro": 2}


def test_predict_takes_rows_by_column_name(model, trained):
    rows = trained[3].head(40)
    expected = model.predict(model.table_rows(rows))
    assert expected.shape == (40, 2)
    import pyarrow as pa

    for given in (rows, rows.drop(columns=["churn"]), rows[["region", "plan", "churn",
                                                            "support_calls", "tenure",
                                                            "monthly_price"]],
                  pa.Table.from_pandas(rows), {c: rows[c].tolist() for c in rows.columns},
                  {"data.x": rows}):
        assert torch.equal(model.predict(given), expected)
    values = nodegraph.forward(model.graph, {"data.x": rows}, compiled=model._ready(),
                               nodes={"out"})
    torch.testing.assert_close(values[("out", "output")], expected)


def test_rows_predict_as_the_split_does(model, trained):
    """The test split's rows, given raw, predict what the split (coded and scaled by the
    data block while reading its files) predicts."""
    rows = model._ready().datasets["data"].rows["test"].numpy()
    raw = trained[3].iloc[rows]
    torch.testing.assert_close(model.predict(raw), model.predict("test"), atol=1e-5,
                               rtol=1e-5)


def test_unknown_category_and_missing_column_are_named(model, trained):
    rows = trained[3].head(5)
    with pytest.raises(NodegraphError, match=r"data\.x.*'region' holds 'mars'.*east, north, "
                                             r"south, west"):
        model.predict(rows.assign(region=["mars"] * 5))
    with pytest.raises(NodegraphError, match=r"data\.x.*no column 'plan'.*tenure, "
                                             r"monthly_price, support_calls, plan, region"):
        model.predict(rows.drop(columns=["plan"]))
    with pytest.raises(NodegraphError, match=r"data\.x.*'tenure' holds 'long'"):
        model.predict(rows.astype({"tenure": object}).assign(tenure=["long"] * 5))


def test_onnx_takes_the_coded_rows(model, trained, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    path = tmp_path / "churn.onnx"
    model.export("onnx", path)
    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert props["input.x.columns"] == "tenure, monthly_price, support_calls, plan, region"
    assert props["input.x.categories"] == ("plan: basic=0, plus=1, pro=2; "
                                           "region: east=0, north=1, south=2, west=3")
    assert "code" in props["input.x.range"]
    rows = trained[3].head(50)
    got = ort.InferenceSession(str(path)).run(None, {"x": model.table_rows(rows)})[0]
    np.testing.assert_allclose(got, model.predict(rows).numpy(), atol=1e-5, rtol=0)
