"""estimators.*: each block predicts what scikit-learn, called directly, predicts.

The blocks fit with scikit-learn and predict in torch from the fitted arrays, so every
test compares the block's output with the fitted scikit-learn model's own predict_proba /
predict on held-out samples, then checks the mechanism around it: the fit on the train
split when a graph runs, the checks of the wires, the saved state without pickle.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

import nodegraph
from nodegraph.model.errors import NodeRuntimeError, ValidationError
from nodegraph.model.graph import Graph
from nodegraph.model.spec import default_registry
from nodegraph.runtime.checkpoint import load_file, save_weights


def built(block_id: str, x: np.ndarray, y: np.ndarray, **params):
    """The block's module, built on meta inputs shaped like (x, y) and fitted on them."""
    spec = default_registry().get(block_id)
    p, problems = spec.resolve_params(params)
    assert not problems
    meta = {"input": torch.empty(x.shape, device="meta"),
            "target": torch.empty(y.shape, device="meta",
                                  dtype=torch.float32 if y.dtype.kind == "f" else torch.long)}
    module = spec.build(p, meta)
    with threadpool_limits(1):
        module.fit(torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y))
    return module


def predicted(module, x: np.ndarray) -> np.ndarray:
    return module(torch.as_tensor(x, dtype=torch.float32)).double().numpy()


def classification(name: str):
    from sklearn import datasets

    x, y = getattr(datasets, name)(return_X_y=True)
    x = ((x - x.mean(0)) / x.std(0)).astype(np.float32)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x))
    train, test = order[: len(x) * 2 // 3], order[len(x) * 2 // 3:]
    return x[train], y[train], x[test], y[test]


def regression():
    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True)
    x = ((x - x.mean(0)) / x.std(0)).astype(np.float32)
    return x[:300], y[:300].astype(np.float32), x[300:], y[300:].astype(np.float32)


def reference(model, x, y):
    with threadpool_limits(1):
        return model.fit(x, y)


@pytest.mark.parametrize("data", ["load_iris", "load_breast_cancer"])
def test_tree_forest_and_boosting_probabilities_are_scikit_learns(data):
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
    from sklearn.tree import DecisionTreeClassifier

    xtr, ytr, xte, _ = classification(data)
    c = int(ytr.max()) + 1
    cases = [("estimators.DecisionTreeClassifier", {"max_depth": 4, "criterion": "entropy"},
              DecisionTreeClassifier(max_depth=4, criterion="entropy", random_state=0)),
             ("estimators.DecisionTreeClassifier", {"ccp_alpha": 0.01},
              DecisionTreeClassifier(ccp_alpha=0.01, random_state=0)),
             ("estimators.RandomForestClassifier", {"n_estimators": 20, "max_depth": 5},
              RandomForestClassifier(n_estimators=20, max_depth=5, random_state=0)),
             ("estimators.GradientBoostingClassifier", {"max_iter": 30},
              HistGradientBoostingClassifier(max_iter=30, early_stopping=False,
                                             random_state=0))]
    for block_id, params, model in cases:
        module = built(block_id, xtr, ytr, num_classes=c, **params)
        ref = reference(model, xtr, ytr).predict_proba(xte)
        np.testing.assert_allclose(predicted(module, xte), ref, atol=1e-6, err_msg=block_id)


def test_regressors_predict_what_scikit_learn_predicts():
    from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.svm import SVR
    from sklearn.tree import DecisionTreeRegressor

    xtr, ytr, xte, _ = regression()
    cases = [("estimators.DecisionTreeRegressor", {"max_depth": 5},
              DecisionTreeRegressor(max_depth=5, random_state=0)),
             ("estimators.RandomForestRegressor", {"n_estimators": 10},
              RandomForestRegressor(n_estimators=10, random_state=0)),
             ("estimators.GradientBoostingRegressor", {"max_iter": 40},
              HistGradientBoostingRegressor(max_iter=40, early_stopping=False,
                                            random_state=0)),
             ("estimators.KNNRegressor", {"n_neighbors": 7, "weights": "distance"},
              KNeighborsRegressor(n_neighbors=7, weights="distance")),
             ("estimators.SVMRegressor", {"c": 50.0, "epsilon": 5.0},
              SVR(C=50.0, epsilon=5.0))]
    for block_id, params, model in cases:
        module = built(block_id, xtr, ytr, **params)
        ref = reference(model, xtr, ytr).predict(xte)
        out = predicted(module, xte)
        assert out.shape == ref.shape, block_id
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-3, err_msg=block_id)


@pytest.mark.parametrize("data", ["load_iris", "load_breast_cancer"])
def test_knn_vote_shares_are_scikit_learns_probabilities(data):
    from sklearn.neighbors import KNeighborsClassifier

    xtr, ytr, xte, _ = classification(data)
    module = built("estimators.KNNClassifier", xtr, ytr, num_classes=int(ytr.max()) + 1,
                   n_neighbors=7)
    ref = reference(KNeighborsClassifier(n_neighbors=7), xtr, ytr).predict_proba(xte)
    np.testing.assert_allclose(predicted(module, xte), ref, atol=1e-6)


@pytest.mark.parametrize("data", ["load_iris", "load_breast_cancer", "load_wine"])
@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly"])
def test_svm_votes_pick_the_class_svc_predicts(data, kernel):
    from sklearn.svm import SVC

    xtr, ytr, xte, _ = classification(data)
    c = int(ytr.max()) + 1
    module = built("estimators.SVMClassifier", xtr, ytr, num_classes=c, kernel=kernel,
                   c=0.5)
    model = reference(SVC(kernel=kernel, C=0.5), xtr, ytr)
    votes = predicted(module, xte)
    np.testing.assert_array_equal(votes.argmax(1), model.predict(xte))
    assert votes.sum(1) == pytest.approx(np.ones(len(xte)))
    if c > 2:  # each pair's vote follows the sign of SVC's one-vs-one decision function
        dec = model.decision_function(xte)  # ovr-shaped from ovo votes: rank equals ours
        np.testing.assert_array_equal(dec.argmax(1), votes.argmax(1))


def test_classes_missing_from_training_keep_their_columns():
    from sklearn.tree import DecisionTreeClassifier

    x = np.random.default_rng(1).normal(size=(60, 3)).astype(np.float32)
    y = np.where(x[:, 0] > 0, 3, 1)  # classes 1 and 3 of 0..4
    module = built("estimators.DecisionTreeClassifier", x, y, num_classes=5)
    out = predicted(module, x)
    assert out.shape == (60, 5) and np.all(out[:, [0, 2, 4]] == 0)
    ref = reference(DecisionTreeClassifier(random_state=0), x, y).predict_proba(x)
    np.testing.assert_allclose(out[:, [1, 3]], ref)


def test_a_tree_walk_matches_a_hand_made_tree():
    """x0 <= 0.5 → leaf 1 (value 10); else x1 <= -1 → leaf 3 (20) or leaf 4 (30)."""
    from nodes.estimators import walk

    left = torch.tensor([[1, -1, 3, -1, -1]])
    right = torch.tensor([[2, -1, 4, -1, -1]])
    feature = torch.tensor([[0, 0, 1, 0, 0]])
    threshold = torch.tensor([[0.5, 0, -1.0, 0, 0]], dtype=torch.float64)
    x = torch.tensor([[0.5, 9.0], [0.6, -1.0], [0.6, -0.9], [-3.0, -5.0]], dtype=torch.float64)
    leaves = walk(x, left, right, feature, threshold, depth=2)
    assert leaves.tolist() == [[1, 3, 4, 1]]


# -- in a graph ------------------------------------------------------------------------


def tree_graph(**tree_params) -> Graph:
    g = Graph("tree")
    g.add("data.Iris", id="data", val_fraction=0.2, test_fraction=0.2)
    g.add("estimators.DecisionTreeClassifier", id="tree", num_classes=3, **tree_params)
    g.add("metrics.Accuracy", id="acc")
    g.connect(("data", "x"), ("tree", "input"))
    g.connect(("data", "y"), ("tree", "target"))
    g.connect(("tree", "output"), ("acc", "input"))
    g.connect(("data", "y"), ("acc", "target"))
    g.update_training(epochs=0)
    return g


def test_a_graph_fits_on_the_train_split_and_scores_every_split():
    from sklearn.tree import DecisionTreeClassifier

    result = nodegraph.train(tree_graph(max_depth=2), device="cpu")
    ds = result.compiled.datasets["data"]
    x, y = (ds.tensors("train")[k].numpy() for k in ("x", "y"))
    model = reference(DecisionTreeClassifier(max_depth=2, random_state=0), x, y)
    for split in ("train", "val", "test"):
        xs, ys = (ds.tensors(split)[k].numpy() for k in ("x", "y"))
        assert result.final[split]["acc"] == pytest.approx((model.predict(xs) == ys).mean())


def test_the_fitted_state_saves_as_safetensors_and_loads_into_a_fresh_graph(tmp_path):
    result = nodegraph.train(tree_graph(max_depth=3), device="cpu")
    state = result.module.block_state()
    assert {"tree.left", "tree.threshold", "tree.value", "tree.fitted"} <= set(state)
    save_weights(tmp_path / "w.safetensors", state)
    fresh = nodegraph.compile(tree_graph(max_depth=3), device="cpu", for_training=False)
    fresh.module.load_block_state(load_file(str(tmp_path / "w.safetensors")))
    x = result.compiled.datasets["data"].tensors("test")["x"]
    np.testing.assert_array_equal(fresh.module.blocks["tree"](x).numpy(),
                                  result.module.blocks["tree"](x).numpy())


def test_an_unfitted_estimator_names_its_node():
    compiled = nodegraph.compile(tree_graph(), device="cpu", for_training=False)
    x = compiled.datasets["data"].tensors("test")
    with pytest.raises(NodeRuntimeError, match="'tree'.*not been fitted"):
        compiled.module({("data", k): v for k, v in x.items()})


def test_targets_outside_num_classes_name_the_node_and_say_what_to_set():
    # validation knows Iris's 3 classes (issue #32): refused before the tree fits
    with pytest.raises(ValidationError, match="has 3 classes.*set tree.num_classes = 3"):
        nodegraph.train(_two_class_tree(), device="cpu")


def _two_class_tree() -> Graph:
    g = tree_graph()
    g.set_param("tree", "num_classes", 2)
    return g


def test_validation_checks_the_wires():
    g = Graph("bad")
    g.add("data.Digits", id="data", layout="image")
    g.add("estimators.RandomForestClassifier", id="forest", num_classes=10)
    g.connect(("data", "x"), ("forest", "input"))
    g.connect(("data", "y"), ("forest", "target"))
    report = nodegraph.validate(g)
    assert [(p.node, p.port) for p in report.errors] == [("forest", "input")]
    assert "Flatten" in report.errors[0].hint
    g2 = Graph("onehot")
    g2.add("data.Iris", id="data")
    g2.add("estimators.KNNClassifier", id="knn", num_classes=3)
    g2.add("estimators.SVMRegressor", id="svr")
    g2.connect(("data", "x"), ("knn", "input"))
    g2.connect(("data", "x"), ("knn", "target"))
    g2.connect(("data", "x"), ("svr", "input"))
    g2.connect(("data", "y"), ("svr", "target"))
    errors = {(p.node, p.port): p.message for p in nodegraph.validate(g2).errors}
    assert "one class index per sample" in errors[("knn", "target")]
    assert "real targets" in errors[("svr", "target")]
    with pytest.raises(ValidationError):
        nodegraph.compile(g2)


def test_importing_the_blocks_leaves_scikit_learn_unloaded():
    code = ("import sys, nodes.estimators, nodegraph.kinds.estimator; "
            "print('sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
