"""Tree views in the editor: the fitted tree of trees_vs_mlp.json is the one scikit-learn
fits on the same split, its pruning path scores what refitted trees score, and a
regularisation path shows w(λ) after Refresh."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QCoreApplication

from nodegraph.gui.training import node_views_trees as nvt

EXAMPLES = Path(__file__).parent.parent.parent / "examples"


def opened(make_window, name: str, epochs: int):
    w = make_window(str(EXAMPLES / f"{name}.json"))
    w.validator.wait(60)
    w.epochs.setValue(epochs)
    assert w.start_training()
    assert w.runner.wait(300)
    QCoreApplication.processEvents()
    return w


def test_the_tree_and_its_pruning_path(make_window):
    from sklearn.tree import DecisionTreeClassifier

    w = opened(make_window, "trees_vs_mlp", 1)
    dock = w.node_views.open("tree")
    assert [v.title for v in dock.views] == ["Tree", "Pruning path"]
    w.node_views.refresh_model()
    tree = dock.view(nvt.TreeView).data
    data = w.runner.result.compiled.datasets["data"]
    x, y = (data.tensors("train")[k].numpy() for k in ("x", "y"))
    model = DecisionTreeClassifier(max_depth=5, ccp_alpha=0.01, random_state=0).fit(x, y)
    assert tree.leaves == model.get_n_leaves() and int(tree.depth.max()) == model.get_depth()
    assert tree.samples[0] == len(y)
    assert tree.labels[0].startswith(f"x[{model.tree_.feature[0]}] ≤ ")
    for parent, child in tree.edges:  # parents sit midway over their children, one level up
        assert tree.depth[child] == tree.depth[parent] + 1
    inner = tree.left >= 0
    assert np.allclose(tree.x[inner], (tree.x[tree.left[inner]] + tree.x[tree.right[inner]]) / 2)

    path = dock.view(nvt.PruningView).data
    assert path.alphas[0] == 0 and path.current == 0.01
    assert path.leaves == sorted(path.leaves, reverse=True) and path.leaves[-1] == 1
    xt, yt = (data.tensors("test")[k].numpy() for k in ("x", "y"))
    for i in (0, len(path.alphas) // 2):
        ref = DecisionTreeClassifier(max_depth=5, ccp_alpha=path.alphas[i],
                                     random_state=0).fit(x, y)
        assert path.scores["test"][i] == pytest.approx((ref.predict(xt) == yt).mean())
    assert "dashed: this block's ccp_alpha 0.01" in dock.view(nvt.PruningView).status.text()

    forest = w.node_views.open("forest")
    assert [v.title for v in forest.views][:1] == ["Tree"]
    w.node_views.refresh_model()
    assert forest.view(nvt.TreeView).data.trees == 100


def test_the_ridge_path_view_waits_for_refresh_then_draws_w_of_lambda(make_window):
    w = make_window(str(EXAMPLES / "ridge_path.json"))
    w.validator.wait(60)
    dock = w.node_views.open("path")
    view = dock.view(nvt.WeightPathView)
    assert [v.title for v in dock.views] == ["Path"]
    w.node_views.refresh_model()
    path = view.data
    assert path.values[0] == 0 and path.weights.shape == (len(path.values), 4)
    norms = np.linalg.norm(path.weights, axis=1)
    assert np.all(np.diff(norms) <= 1e-9)
