"""The core's datasets: splits (random, stratified, chronological, K-fold), normalisation
fitted on the training split only, and batching."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nodegraph.kinds.dataset import (
    DATA_PARAMS,
    Dataset,
    data_params,
    from_arrays,
    kfold_indices,
    normalise,
    split_indices,
)
from nodegraph.model.errors import NodegraphError


def _is_partition(parts, n):
    joined = np.concatenate(parts)
    return len(joined) == n and np.array_equal(np.sort(joined), np.arange(n))


# -- splits ------------------------------------------------------------------------------

def test_random_split_partitions_with_the_asked_sizes():
    idx = split_indices(100, 0.2, 0.1, "random", seed=3)
    assert [len(idx[s]) for s in ("train", "val", "test")] == [70, 20, 10]
    assert _is_partition(list(idx.values()), 100)
    again = split_indices(100, 0.2, 0.1, "random", seed=3)
    assert all(np.array_equal(idx[s], again[s]) for s in idx)
    other = split_indices(100, 0.2, 0.1, "random", seed=4)
    assert not np.array_equal(idx["val"], other["val"])


def test_chronological_split_keeps_order():
    idx = split_indices(10, 0.2, 0.1, "chronological")
    assert idx["train"].tolist() == list(range(7))
    assert idx["val"].tolist() == [7, 8] and idx["test"].tolist() == [9]


def test_stratified_split_keeps_class_proportions():
    labels = np.repeat([0, 1, 2], [60, 30, 10])
    idx = split_indices(100, 0.2, 0.1, "stratified", seed=0, labels=labels)
    assert _is_partition(list(idx.values()), 100)
    for split, share in (("train", 0.7), ("val", 0.2), ("test", 0.1)):
        counts = np.bincount(labels[idx[split]], minlength=3)
        assert counts.tolist() == [round(60 * share), round(30 * share), round(10 * share)]


@pytest.mark.parametrize("mode", ["random", "chronological"])
def test_a_split_that_leaves_nothing_to_train_on_is_refused(mode):
    # 2 samples: round(0.5 * 2) = 1 to val, round(0.4 * 2) = 1 to test, 0 left to train
    with pytest.raises(NodegraphError, match="leaves no samples to train on: 2 samples, 1 "
                       "to val and 1 to test"):
        split_indices(2, 0.5, 0.4, mode)
    assert len(split_indices(3, 0.5, 0.1, mode)["train"]) == 1  # one left is enough


def test_validation_names_the_data_block_whose_split_leaves_nothing_to_train_on():
    import nodegraph

    g = nodegraph.Graph("tiny")
    g.add("data.Moons", id="d", n=2, val_fraction=0.5, test_fraction=0.4)
    [problem] = nodegraph.validate(g).problems
    assert (problem.node, problem.port, problem.kind) == ("d", "x", "data_error")
    assert "no samples to train on" in problem.message


def test_stratified_split_needs_labels():
    with pytest.raises(NodegraphError, match="class labels"):
        split_indices(10, 0.2, 0.0, "stratified")


# -- K-fold ------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["random", "stratified"])
def test_kfold_validation_folds_partition_the_data(mode):
    labels = np.repeat([0, 1, 2], [13, 7, 3])
    rows = np.arange(23)
    cuts = [kfold_indices(rows, 5, k, mode, seed=2, labels=labels) for k in range(5)]
    assert _is_partition([val for _, val in cuts], 23)
    for train, val in cuts:  # each fold trains on exactly the others
        assert np.array_equal(np.sort(np.concatenate([train, val])), rows)
        assert len(val) in (4, 5)


def test_stratified_kfold_keeps_class_proportions():
    labels = np.repeat([0, 1, 2], [40, 20, 8])
    for k in range(4):
        _, val = kfold_indices(np.arange(68), 4, k, "stratified", seed=1, labels=labels)
        assert np.bincount(labels[val], minlength=3).tolist() == [10, 5, 2]


def test_chronological_kfold_trains_on_the_past_only():
    rows = np.arange(12)
    cuts = [kfold_indices(rows, 3, k, "chronological") for k in range(3)]
    assert [v.tolist() for _, v in cuts] == [[3, 4, 5], [6, 7, 8], [9, 10, 11]]
    for train, val in cuts:
        assert train.tolist() == list(range(val[0]))


def test_kfold_holds_the_test_split_out_of_every_fold():
    idx = [split_indices(50, 0.0, 0.2, "random", seed=0, folds=4, fold=k) for k in range(4)]
    test = idx[0]["test"]
    assert len(test) == 10 and all(np.array_equal(i["test"], test) for i in idx)
    assert _is_partition([test, *[i["val"] for i in idx]], 50)
    assert all(len(np.intersect1d(i["train"], test)) == 0 for i in idx)


def test_kfold_params_reach_from_arrays():
    assert {"folds", "fold"} <= {p.name for p in DATA_PARAMS}
    x = np.arange(20, dtype=np.float32)[:, None]
    p = {"folds": 4, "fold": 1, "val_fraction": 0.5, "split": "chronological", "batch_size": 0}
    ds = from_arrays({"x": x, "y": x}, p)
    assert ds.tensors("val")["x"].reshape(-1).tolist() == [8, 9, 10, 11]
    assert ds.size("train") == 8  # val_fraction is unused with folds on


@pytest.mark.parametrize("folds, fold, message", [(1, 0, "at least 2 folds"),
                                                  (3, 3, "numbered 0 to 2"),
                                                  (30, 0, "cannot be cut")])
def test_kfold_rejects_impossible_settings(folds, fold, message):
    with pytest.raises(NodegraphError, match=message):
        split_indices(20, 0.0, 0.0, folds=folds, fold=fold)


# -- normalisation -----------------------------------------------------------------------

def _with_outlying_test_rows():
    rng = np.random.default_rng(0)
    x = rng.normal(5.0, 2.0, size=(40, 3)).astype(np.float32)
    x[30:] += 100.0  # the test rows live far away; their statistics must not leak
    idx = {"train": np.arange(30), "val": np.array([], dtype=np.int64),
           "test": np.arange(30, 40)}
    return x, idx


def test_zscore_uses_training_statistics_only():
    x, idx = _with_outlying_test_rows()
    out = normalise({"x": x, "y": x[:, :1]}, idx["train"], "zscore")["x"]
    train = x[:30]
    np.testing.assert_allclose(out[:30].mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(out[:30].std(0), 1.0, atol=1e-5)
    np.testing.assert_allclose(out[30:], (x[30:] - train.mean(0)) / train.std(0), rtol=1e-5)
    assert out[30:].mean() > 30  # still far away: scaled by train statistics only


def test_minmax_uses_training_range_only():
    x, idx = _with_outlying_test_rows()
    ds = from_arrays({"x": x, "y": x[:, :1]}, {"normalize": "minmax", "batch_size": 0},
                     given_splits=idx)
    train, test = ds.tensors("train")["x"].numpy(), ds.tensors("test")["x"].numpy()
    np.testing.assert_allclose(train.min(0), 0.0, atol=1e-6)
    np.testing.assert_allclose(train.max(0), 1.0, atol=1e-6)
    lo, span = x[:30].min(0), x[:30].max(0) - x[:30].min(0)
    np.testing.assert_allclose(test, (x[30:] - lo) / span, rtol=1e-5)
    np.testing.assert_array_equal(ds.tensors("test")["y"].numpy(), x[30:, :1])  # y untouched


def test_constant_columns_are_not_divided_by_zero():
    x = np.ones((5, 2), np.float32)
    out = normalise({"x": x}, np.arange(5), "zscore")["x"]
    np.testing.assert_array_equal(out, 0.0)


# -- datasets and batching ---------------------------------------------------------------

def test_from_arrays_converts_dtypes_and_fixes_test_rows():
    x = np.arange(10, dtype=np.float64)[:, None]
    y = np.arange(10) % 2
    ds = from_arrays({"x": x, "y": y}, {"val_fraction": 0.25, "test_fraction": 0.9},
                     test_rows=np.arange(8, 10))
    assert ds.tensors("test")["x"].reshape(-1).tolist() == [8.0, 9.0]
    assert ds.size("val") == 2 and ds.size("train") == 6  # test_fraction unused
    assert ds.tensors("train")["x"].dtype == torch.float32
    assert ds.tensors("train")["y"].dtype == torch.int64


def test_shuffled_batches_cover_the_split_once():
    x = torch.arange(10.0)[:, None]
    ds = Dataset({"x": x, "y": x * 2}, {"train": torch.arange(10)}, batch_size=4)
    batches = list(ds.batches("train", shuffle=True, generator=torch.Generator().manual_seed(0)))
    assert [len(b["x"]) for b in batches] == [4, 4, 2] and ds.num_batches("train") == 3
    seen = torch.cat([b["x"] for b in batches]).reshape(-1)
    assert sorted(seen.tolist()) == list(range(10)) and seen.tolist() != list(range(10))
    assert all(torch.equal(b["y"], b["x"] * 2) for b in batches)  # rows stay together


def test_batch_size_zero_is_the_whole_split_and_meta_has_its_shape():
    x = torch.zeros(7, 3)
    ds = Dataset({"x": x}, {"train": torch.arange(7)}, batch_size=0)
    assert [len(b["x"]) for b in ds.batches("train")] == [7]
    meta = ds.meta()["x"]
    assert meta.shape == (7, 3) and meta.device.type == "meta"


def test_data_params_changes_defaults_and_refuses_unknown_names():
    changed = {p.name: p.default for p in data_params(batch_size=4, folds=5)}
    assert changed["batch_size"] == 4 and changed["folds"] == 5
    with pytest.raises(ValueError, match="not data params"):
        data_params(batchsize=4)


@pytest.mark.parametrize("how", ["zscore", "minmax"])
def test_fitted_normalisation_is_readable_and_reapplies_to_raw_inputs(how):
    x, idx = _with_outlying_test_rows()
    ds = from_arrays({"x": x, "y": x[:, :1]}, {"normalize": how, "batch_size": 0},
                     given_splits=idx)
    train = x[:30]
    centre = train.mean(0) if how == "zscore" else train.min(0)
    scale = train.std(0) if how == "zscore" else train.max(0) - train.min(0)
    state = ds.normalization_state()
    assert set(state) == {"x.centre", "x.scale"}  # y is not normalised
    np.testing.assert_allclose(state["x.centre"].numpy(), centre, rtol=1e-5)
    np.testing.assert_allclose(state["x.scale"].numpy(), scale, rtol=1e-5)
    raw_test = torch.as_tensor(x[30:])
    torch.testing.assert_close(ds.normalize_raw("x", raw_test), ds.tensors("test")["x"])
    torch.testing.assert_close(ds.normalize_raw("y", raw_test), raw_test)  # not normalised


def test_no_normalisation_has_no_state():
    x, idx = _with_outlying_test_rows()
    ds = from_arrays({"x": x, "y": x[:, :1]}, {"batch_size": 0}, given_splits=idx)
    assert ds.normalization_state() == {}
