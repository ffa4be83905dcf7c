"""examples/trees_vs_mlp.json: a pruned tree, a forest, boosting and an MLP on one split of
the breast-cancer data. The estimators' test accuracies equal those of the same
scikit-learn models fitted directly on the graph's train split; all four models learn
(> 0.92 on the 113 held-out test samples; the full run measures 0.965, 0.956, 0.973,
0.991)."""

from __future__ import annotations

import numpy as np
import pytest
from classic_support import assert_builder_writes_files, reference_fit, run, split_arrays


@pytest.fixture(scope="module")
def result():
    return run("trees_vs_mlp", epochs=8)


def test_every_model_learns_the_held_out_split(result):
    test = result.final["test"]
    for name in ("tree", "forest", "boosting", "mlp"):
        assert test[f"{name}_acc"] > 0.92, name
    matrix = np.array(test["tree_confusion.matrix"])
    n = len(result.compiled.datasets["data"].tensors("test")["y"])
    assert matrix.sum() == n and np.trace(matrix) / n == pytest.approx(test["tree_acc"])


def test_the_estimators_score_what_scikit_learn_scores_on_the_same_split(result):
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
    from sklearn.tree import DecisionTreeClassifier

    x, y = split_arrays(result, "train")
    xt, yt = split_arrays(result, "test")
    x, xt = x.astype(np.float32), xt.astype(np.float32)
    models = {"tree": DecisionTreeClassifier(max_depth=5, ccp_alpha=0.01, random_state=0),
              "forest": RandomForestClassifier(n_estimators=100, random_state=0),
              "boosting": HistGradientBoostingClassifier(early_stopping=False,
                                                         random_state=0)}
    for name, model in models.items():
        accuracy = (reference_fit(model, x, y).predict(xt) == yt).mean()
        assert result.final["test"][f"{name}_acc"] == pytest.approx(accuracy), name


def test_the_file_is_what_the_builder_writes():
    assert_builder_writes_files("trees_vs_mlp")
