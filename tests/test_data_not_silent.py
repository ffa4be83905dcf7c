"""Nothing dropped in silence (issue #37 item 3) for tables and shards: WebDataset samples
missing a field, CSV columns mixing numbers and text, a header row repeated inside a CSV
are counted in a validation warning, refused with `strict = true`, and the left-out
samples are named ({"file", "reason"}) for the run's history."""

from __future__ import annotations

import numpy as np
import pytest

from nodegraph.check.validate import validate
from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph
from nodegraph.model.spec import default_registry


def _report(block: str, **params):
    g = Graph("silent")
    g.add(block, id="reader", **{"batch_size": 8, **params})
    return validate(g)


def _build(block: str, **params):
    spec = default_registry().get(block)
    resolved, problems = spec.resolve_params(params)
    assert not problems, problems
    return spec.build(resolved)


@pytest.fixture
def gappy(tmp_path):
    """Two shards of 20 samples; 3 lack their .cls field, 2 their .npy field."""
    import webdataset

    rng = np.random.default_rng(0)
    for s in range(2):
        with webdataset.TarWriter(str(tmp_path / f"train-{s}.tar")) as sink:
            for i in range(20):
                sample = {"__key__": f"{s}_{i:03d}",
                          "npy": rng.normal(size=3).astype(np.float32), "cls": i % 2}
                if (s, i) in {(0, 3), (0, 9), (1, 0)}:
                    del sample["cls"]
                if (s, i) in {(1, 5), (1, 19)}:
                    del sample["npy"]
                sink.write(sample)
    return tmp_path


def test_incomplete_shard_samples_are_a_counted_warning(gappy):
    report = _report("data.WebDataset", shards=str(gappy))
    assert report.ok
    (warning,) = [p for p in report.problems if p.severity == "warning"]
    assert "5 samples of the shards miss a field" in warning.message
    assert "35 complete ones" in warning.message
    assert "sample '0_003' has no '.cls' field" in warning.message


def test_strict_refuses_incomplete_shard_samples(gappy):
    report = _report("data.WebDataset", shards=str(gappy), strict=True)
    assert not report.ok
    assert "5 samples of the shards miss a field" in report.errors[0].message


@pytest.mark.parametrize("storage", ["memory", "stream"])
def test_the_left_out_samples_are_named_for_the_history(gappy, storage):
    data = _build("data.WebDataset", shards=str(gappy), storage=storage)
    named = data.skips if storage == "memory" else data.refused
    assert data.size("train") == 35
    assert [e["file"] for e in named] == [f"{gappy / 'train-0.tar'}:0_003",
                                          f"{gappy / 'train-0.tar'}:0_009",
                                          f"{gappy / 'train-1.tar'}:1_000",
                                          f"{gappy / 'train-1.tar'}:1_005",
                                          f"{gappy / 'train-1.tar'}:1_019"]
    assert "has no '.npy' field" in named[3]["reason"]


def _csv(tmp_path, rows: list[str]) -> str:
    path = tmp_path / "t.csv"
    path.write_text("\n".join(["age,city,label", *rows]) + "\n")
    return str(path)


def test_a_header_row_inside_a_csv_is_a_counted_warning(tmp_path):
    rows = [f"{20 + i},{'ab'[i % 2]},{i % 2}" for i in range(30)]
    rows[10] = rows[20] = "age,city,label"  # two files concatenated with their headers
    path = _csv(tmp_path, rows)
    report = _report("data.Parquet", path=path, targets=["label"], target_kind="class")
    warnings = [p.message for p in report.problems if p.severity == "warning"]
    assert any("column 'label' holds 'label' (2 rows)" in w for w in warnings), warnings
    report = _report("data.Parquet", path=path, targets=["label"], target_kind="class",
                     strict=True)
    assert not report.ok and "header row" in report.errors[0].message
    with pytest.raises(NodegraphError, match="header row"):  # built without validation
        _build("data.Parquet", path=path, targets=["label"], target_kind="class",
               strict=True)


def test_a_csv_column_mixing_numbers_and_text_is_a_warning(tmp_path):
    rows = [f"{20 + i},{'ab'[i % 2]},{i % 2}" for i in range(30)]
    rows[4] = "unknown,a,0"
    path = _csv(tmp_path, rows)
    report = _report("data.Parquet", path=path, targets=["label"], target_kind="class")
    (warning,) = [p.message for p in report.problems if p.severity == "warning"]
    assert "column 'age' mixes numbers and text (29 distinct numbers, 1 text value: 'unknown')" \
        in warning
    assert not _report("data.Parquet", path=path, targets=["label"], target_kind="class",
                       strict=True).ok


def test_a_clean_csv_warns_of_nothing(tmp_path):
    path = _csv(tmp_path, [f"{20 + i},{'ab'[i % 2]},{i % 2}" for i in range(30)])
    report = _report("data.Parquet", path=path, targets=["label"], target_kind="class",
                     strict=True)
    assert report.ok and not report.problems
