"""Estimators: decision trees, forests, boosting, k-NN and SVMs beside the networks.

Not differentiable, yet compared with networks on the same data, so each is an op block
with inputs ``input`` (N, F) and ``target`` that fits on the whole train split when the
graph runs (`nodegraph.kinds.estimator`) and predicts on every split. scikit-learn fits
(imported inside the fit: start-up stays fast); the fitted model is kept as plain arrays —
a tree's children, features, thresholds and leaf values, a k-NN's training set, an SVM's
support vectors and dual coefficients — and predicted from in torch, so it saves with the
run's weights as safetensors (no pickle) and runs on any device.

Classifiers output class probabilities (N, num_classes), which metrics.Accuracy,
ConfusionMatrix and ECE (``scores: probabilities``) read; an SVM outputs its one-vs-one
vote shares. Targets are class indices 0..num_classes−1, one per sample. Regressors output
the target's shape, for metrics.MSE and R2.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch

from nodegraph.kinds.declare import estimator
from nodegraph.kinds.estimator import Estimator
from nodegraph.model.errors import NodegraphError, PortError
from nodegraph.model.spec import (
    Param,
    Params,
    Port,
    choice_param,
    float_param,
    int_param,
)
from nodes._shapes import fmt

PORTS = {"inputs": [Port("input", doc="features (N, F)"),
                    Port("target", doc="class indices (N,) or the values to regress")],
         "outputs": [Port("output", doc="class probabilities (N, num_classes), or the "
                          "predicted values, shaped like the target")]}
NUM_CLASSES = int_param("num_classes", 2, "number of classes; targets are 0..num_classes−1",
                        min=2)
RANDOM_STATE = int_param("random_state", 0, "seed of the estimator's own randomness", min=0)
MAX_DEPTH = int_param("max_depth", None, "deepest split level; empty grows until pure",
                      min=1, nullable=True)


# -- shared checks ---------------------------------------------------------------------


def _check_inputs(x: dict, classifier: bool, single_output: bool = False) -> None:
    """Validation of the wires, like any block's: features (N, F), one target per sample."""
    if "input" not in x or "target" not in x:
        return
    feats, target = x["input"], x["target"]
    if feats.ndim != 2:
        raise PortError("input", f"needs features (N, F) but receives {fmt(feats.shape)}",
                        "insert layers.Flatten before it")
    if not feats.dtype.is_floating_point:
        raise PortError("input", f"needs real features, not {feats.dtype}",
                        kind="dtype_mismatch")
    if target.shape[0] != feats.shape[0]:
        raise PortError("target", f"{fmt(target.shape)} targets for {fmt(feats.shape)} "
                        "features")
    wide = target.ndim > 2 or (target.ndim == 2 and target.shape[1] != 1)
    if classifier and wide:
        raise PortError("target", f"needs one class index per sample, (N,) or (N, 1), but "
                        f"receives {fmt(target.shape)}",
                        "use the data block's class targets, not one-hot rows")
    if not classifier and (target.ndim > 2 or (single_output and wide)):
        wanted = "one value per sample" + ("" if single_output else " or (N, k)")
        raise PortError("target", f"needs {wanted}, but receives {fmt(target.shape)}")
    if not classifier and not target.dtype.is_floating_point:
        raise PortError("target", f"a regressor needs real targets, not {target.dtype}",
                        "use the classifier variant for class indices", kind="dtype_mismatch")


def _labels(target: np.ndarray, num_classes: int) -> np.ndarray:
    """Class indices as int64, checked against `num_classes`."""
    y = target.reshape(len(target), -1)[:, 0]
    if not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
        raise NodegraphError("its target holds values that are not class indices; wire "
                             "class indices 0..num_classes−1")
    y = y.astype(np.int64)
    if y.min() < 0 or y.max() >= num_classes:
        raise NodegraphError(f"its targets run from {y.min()} to {y.max()}, outside 0.."
                             f"{num_classes - 1}; set num_classes to at least {y.max() + 1}")
    return y


def _spread(columns: np.ndarray, classes: np.ndarray, num_classes: int) -> np.ndarray:
    """Per-class columns of the classes seen in training placed among all classes."""
    out = np.zeros((*columns.shape[:-1], num_classes), dtype=columns.dtype)
    out[..., classes] = columns
    return out


class _Classifier(Estimator):
    def __init__(self, num_classes: int):
        super().__init__()
        self.num_classes = num_classes

    def out_meta(self, x, target):
        return torch.empty((x.shape[0], self.num_classes), device="meta")


class _Regressor(Estimator):
    def __init__(self, target_shape: tuple[int, ...]):
        super().__init__()
        self.target_shape = tuple(target_shape)  # after the batch dim

    def out_meta(self, x, target):
        return torch.empty((x.shape[0], *self.target_shape), device="meta")

    def _shaped(self, values: torch.Tensor) -> torch.Tensor:
        return values.float().reshape(values.shape[0], *self.target_shape)

    def _targets(self, target: np.ndarray) -> np.ndarray:
        y = target.reshape(len(target), -1).astype(np.float64)
        return y[:, 0] if y.shape[1] == 1 else y


# -- trees and forests: arrays of nodes walked in torch -------------------------------

TREE_STATE = ("left", "right", "feature", "threshold", "value", "impurity", "samples", "depth")


def _tree_arrays(trees, value_fn) -> dict[str, np.ndarray]:
    """scikit-learn `tree_` objects as stacked, padded arrays (T, M): a leaf has
    left = right = −1; `value_fn(tree_)` gives its per-node outputs (M, K)."""
    m = max(t.node_count for t in trees)
    k = value_fn(trees[0]).shape[1]

    def pad(a, fill, dtype):
        out = np.full((len(trees), m, *a[0].shape[1:]), fill, dtype=dtype)
        for i, row in enumerate(a):
            out[i, :len(row)] = row
        return out

    return {"left": pad([t.children_left for t in trees], -1, np.int64),
            "right": pad([t.children_right for t in trees], -1, np.int64),
            "feature": pad([np.maximum(t.feature, 0) for t in trees], 0, np.int64),
            "threshold": pad([t.threshold for t in trees], 0.0, np.float64),
            "value": pad([value_fn(t) for t in trees], 0.0, np.float64).reshape(
                len(trees), m, k),
            "impurity": pad([t.impurity for t in trees], 0.0, np.float64),
            "samples": pad([t.n_node_samples for t in trees], 0, np.int64),
            "depth": np.asarray(max(t.max_depth for t in trees), dtype=np.int64)}


def walk(x: torch.Tensor, left, right, feature, threshold, depth: int,
         missing_left: torch.Tensor | None = None) -> torch.Tensor:
    """The leaf each sample reaches in each tree, (T, N): go left where x[f] <= threshold
    (a NaN goes where `missing_left` says, else right). All trees and samples step
    together, one level per iteration."""
    t, n = left.shape[0], x.shape[0]
    node = torch.zeros((t, n), dtype=torch.long, device=x.device)
    for _ in range(depth):
        f = feature.gather(1, node)
        xv = x.gather(1, f.T).T  # (T, N): each sample's value of its node's feature
        go_left = xv <= threshold.gather(1, node)
        if missing_left is not None:
            go_left = go_left | (xv.isnan() & missing_left.gather(1, node))
        nxt = torch.where(go_left, left.gather(1, node), right.gather(1, node))
        node = torch.where(nxt < 0, node, nxt)
    return node


class _Trees:
    """Prediction from stacked tree arrays: the mean of the trees' leaf values (N, K)."""

    # buffers (STATE) and settings of the estimators this is mixed into
    left: torch.Tensor
    right: torch.Tensor
    feature: torch.Tensor
    threshold: torch.Tensor
    depth: torch.Tensor
    value: torch.Tensor

    def leaf_values(self, x: torch.Tensor) -> torch.Tensor:
        # scikit-learn compares float32 features with float64 thresholds
        x = x.float().double()
        leaves = walk(x, self.left, self.right, self.feature, self.threshold,
                      int(self.depth))
        k = self.value.shape[-1]
        vals = self.value.gather(1, leaves[..., None].expand(-1, -1, k))  # (T, N, K)
        return vals.mean(0)


def _class_fractions(num_classes: int, classes: np.ndarray):
    def value(tree):
        v = tree.value[:, 0, :]
        v = v / np.maximum(v.sum(1, keepdims=True), 1e-300)  # counts in older versions
        return _spread(v, classes, num_classes)
    return value


class TreeClassifier(_Trees, _Classifier):
    """A decision tree or a forest of them: probabilities are leaf class fractions,
    averaged over the trees."""

    STATE = TREE_STATE

    def __init__(self, num_classes: int, make):
        super().__init__(num_classes)
        self.make = make  # () -> an unfitted scikit-learn estimator

    def fit_arrays(self, x, target):
        y = _labels(target, self.num_classes)
        est = self.make().fit(x, y)
        trees = [e.tree_ for e in getattr(est, "estimators_", [est])]
        return _tree_arrays(trees, _class_fractions(self.num_classes, est.classes_))

    def predict(self, x):
        return self.leaf_values(x).float()


class TreeRegressor(_Trees, _Regressor):
    STATE = TREE_STATE

    def __init__(self, target_shape, make):
        super().__init__(target_shape)
        self.make = make

    def fit_arrays(self, x, target):
        est = self.make().fit(x, self._targets(target))
        trees = [e.tree_ for e in getattr(est, "estimators_", [est])]
        return _tree_arrays(trees, lambda t: t.value[:, :, 0])

    def predict(self, x):
        return self._shaped(self.leaf_values(x))


def _tree_params(forest: bool, features: str = "sqrt") -> list[Param]:
    params: list[Param] = [MAX_DEPTH,
              int_param("min_samples_leaf", 1, "fewest training samples in a leaf", min=1),
              float_param("ccp_alpha", 0.0, "cost-complexity pruning α: subtrees whose "
                          "impurity gain per leaf is below α are cut (0: no pruning)", min=0)]
    if forest:
        params = [N_ESTIMATORS, *params, replace(MAX_FEATURES, default=features)]
    return [*params, RANDOM_STATE]


N_ESTIMATORS = int_param("n_estimators", 100, "number of trees", min=1, max=10000)
MAX_FEATURES: Param[str] = choice_param("max_features", ("sqrt", "log2", "all"), "sqrt",
                                        "features tried at each split")


class TreeParams(Params):
    """What every tree and forest declares."""

    criterion: str
    max_depth: int | None
    min_samples_leaf: int
    ccp_alpha: float
    random_state: int


class TreeClassifierParams(TreeParams):
    num_classes: int


def _sk_tree_kwargs(p: TreeParams, forest: bool) -> dict:
    kw: dict[str, Any] = {"max_depth": p.max_depth, "min_samples_leaf": p.min_samples_leaf,
                          "ccp_alpha": p.ccp_alpha, "random_state": p.random_state}
    if forest:  # the forests' own params
        features = p.typed(MAX_FEATURES)
        kw.update(n_estimators=p.typed(N_ESTIMATORS),
                  max_features=None if features == "all" else features, n_jobs=1)
    return kw


def _tree_classifier(forest: bool):
    def build(p: TreeClassifierParams, x):
        _check_inputs(x, classifier=True)

        def make():
            if forest:
                from sklearn.ensemble import RandomForestClassifier as cls
            else:
                from sklearn.tree import DecisionTreeClassifier as cls
            return cls(criterion=p.criterion, **_sk_tree_kwargs(p, forest))
        return TreeClassifier(p.num_classes, make)
    return build


def _tree_regressor(forest: bool):
    def build(p: TreeParams, x):
        _check_inputs(x, classifier=False)

        def make():
            if forest:
                from sklearn.ensemble import RandomForestRegressor as cls
            else:
                from sklearn.tree import DecisionTreeRegressor as cls
            return cls(criterion=p.criterion, **_sk_tree_kwargs(p, forest))
        return TreeRegressor(tuple(x["target"].shape[1:]) if "target" in x else (), make)
    return build


# -- histogram gradient boosting -------------------------------------------------------

HGB_STATE = ("left", "right", "feature", "threshold", "missing_left", "value", "tree_class",
             "baseline", "depth")


def _hgb_arrays(est) -> dict[str, np.ndarray]:
    """The predictors of a fitted HistGradientBoosting model, stacked: tree i adds to raw
    score column `tree_class[i]`; raw = baseline + the sum of the leaves reached."""
    trees = [(k, pred.nodes) for it in est._predictors for k, pred in enumerate(it)]
    if any(nodes["is_categorical"].any() for _, nodes in trees):
        raise NodegraphError("categorical splits are not supported; give numeric features")
    m = max(len(nodes) for _, nodes in trees)
    out: dict[str, np.ndarray] = {"left": np.full((len(trees), m), -1, np.int64),
           "right": np.full((len(trees), m), -1, np.int64),
           "feature": np.zeros((len(trees), m), np.int64),
           "threshold": np.zeros((len(trees), m), np.float64),
           "missing_left": np.zeros((len(trees), m), bool),
           "value": np.zeros((len(trees), m), np.float64)}
    for i, (_, nodes) in enumerate(trees):
        n, leaf = len(nodes), nodes["is_leaf"].astype(bool)
        out["left"][i, :n] = np.where(leaf, -1, nodes["left"].astype(np.int64))
        out["right"][i, :n] = np.where(leaf, -1, nodes["right"].astype(np.int64))
        out["feature"][i, :n] = np.maximum(nodes["feature_idx"], 0)
        out["threshold"][i, :n] = nodes["num_threshold"]
        out["missing_left"][i, :n] = nodes["missing_go_to_left"].astype(bool)
        out["value"][i, :n] = nodes["value"]
    out["tree_class"] = np.array([k for k, _ in trees], np.int64)
    out["baseline"] = np.asarray(est._baseline_prediction, np.float64).reshape(-1)
    out["depth"] = np.asarray(max(int(nodes["depth"].max()) for _, nodes in trees), np.int64)
    return out


class _Boosted:
    # buffers (STATE) and settings of the estimators this is mixed into
    left: torch.Tensor
    right: torch.Tensor
    feature: torch.Tensor
    threshold: torch.Tensor
    depth: torch.Tensor
    missing_left: torch.Tensor
    value: torch.Tensor
    baseline: torch.Tensor
    tree_class: torch.Tensor
    classes: torch.Tensor

    def raw(self, x: torch.Tensor) -> torch.Tensor:
        """Raw scores (N, K): the baseline plus every tree's leaf value in its column."""
        x = x.double()
        leaves = walk(x, self.left, self.right, self.feature, self.threshold,
                      int(self.depth), self.missing_left)
        vals = self.value.gather(1, leaves)  # (T, N)
        raw = self.baseline.expand(x.shape[0], -1).clone()
        raw.index_add_(1, self.tree_class, vals.T)
        return raw


class BoostingClassifier(_Boosted, _Classifier):
    STATE = (*HGB_STATE, "classes")

    def __init__(self, num_classes: int, make):
        super().__init__(num_classes)
        self.make = make

    def fit_arrays(self, x, target):
        est = self.make().fit(x, _labels(target, self.num_classes))
        return {**_hgb_arrays(est), "classes": est.classes_.astype(np.int64)}

    def predict(self, x):
        raw = self.raw(x)
        if raw.shape[1] == 1:  # binary: one logit for the second class
            p1 = torch.sigmoid(raw[:, 0])
            proba = torch.stack([1 - p1, p1], 1)
        else:
            proba = torch.softmax(raw, 1)
        out = torch.zeros((x.shape[0], self.num_classes), dtype=proba.dtype, device=x.device)
        out[:, self.classes] = proba
        return out.float()


class BoostingRegressor(_Boosted, _Regressor):
    STATE = HGB_STATE

    def __init__(self, target_shape, make):
        super().__init__(target_shape)
        self.make = make

    def fit_arrays(self, x, target):
        return _hgb_arrays(self.make().fit(x, self._targets(target)))

    def predict(self, x):
        return self._shaped(self.raw(x)[:, 0])


class BoostingParams(Params):
    """What both gradient-boosting blocks declare."""

    max_iter: int
    learning_rate: float
    max_leaf_nodes: int | None
    max_depth: int | None
    l2_regularization: float
    random_state: int


class BoostingClassifierParams(BoostingParams):
    num_classes: int


class BoostingRegressorParams(BoostingParams):
    loss: str


def _hgb_kwargs(p: BoostingParams) -> dict:
    return {"max_iter": p.max_iter, "learning_rate": p.learning_rate,
            "max_leaf_nodes": p.max_leaf_nodes, "max_depth": p.max_depth,
            "l2_regularization": p.l2_regularization, "early_stopping": False,
            "random_state": p.random_state}


def _boosting(classifier: bool):
    def classify(p: BoostingClassifierParams, x):
        _check_inputs(x, classifier=True, single_output=True)

        def make():
            from sklearn.ensemble import HistGradientBoostingClassifier as cls
            return cls(**_hgb_kwargs(p))
        return BoostingClassifier(p.num_classes, make)

    def regress(p: BoostingRegressorParams, x):
        _check_inputs(x, classifier=False, single_output=True)

        def make():
            from sklearn.ensemble import HistGradientBoostingRegressor as cls
            return cls(loss=p.loss, **_hgb_kwargs(p))
        return BoostingRegressor(tuple(x["target"].shape[1:]) if "target" in x else (), make)
    return classify if classifier else regress


HGB_PARAMS = [int_param("max_iter", 100, "boosting rounds (trees per class)", min=1, max=10000),
              float_param("learning_rate", 0.1, "shrinkage of each tree's contribution",
                          min=0),
              int_param("max_leaf_nodes", 31, "leaves per tree", min=2, nullable=True),
              MAX_DEPTH,
              float_param("l2_regularization", 0.0, "L2 penalty on the leaf values", min=0),
              RANDOM_STATE]


# -- k nearest neighbours --------------------------------------------------------------


class _Neighbours:
    # buffers (STATE) and settings of the estimators this is mixed into
    train_x: torch.Tensor
    train_y: torch.Tensor
    k: int
    weighting: str

    def neighbours(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Distances and indices of the k nearest training samples, (N, k), nearest first;
        equal distances keep the training order, as scikit-learn's brute force does."""
        d = torch.cdist(x.double(), self.train_x)
        k = min(self.k, self.train_x.shape[0])
        order = torch.sort(d, dim=1, stable=True)
        return order.values[:, :k], order.indices[:, :k]

    def weights(self, dist: torch.Tensor) -> torch.Tensor:
        if self.weighting == "uniform":
            return torch.ones_like(dist)
        zero = dist == 0
        # a sample at distance 0 takes all the weight, as in scikit-learn
        w = torch.where(zero.any(1, keepdim=True), zero.double(), 1.0 / dist)
        return w


class KNNClassifier(_Neighbours, _Classifier):
    STATE = ("train_x", "train_y")

    def __init__(self, num_classes: int, k: int, weighting: str):
        super().__init__(num_classes)
        self.k, self.weighting = k, weighting

    def fit_arrays(self, x, target):
        return {"train_x": x.astype(np.float64), "train_y": _labels(target, self.num_classes)}

    def predict(self, x):
        dist, idx = self.neighbours(x)
        w = self.weights(dist)
        votes = torch.zeros((x.shape[0], self.num_classes), dtype=w.dtype, device=x.device)
        votes.scatter_add_(1, self.train_y[idx], w)
        return (votes / votes.sum(1, keepdim=True)).float()


class KNNRegressor(_Neighbours, _Regressor):
    STATE = ("train_x", "train_y")

    def __init__(self, target_shape, k: int, weighting: str):
        super().__init__(target_shape)
        self.k, self.weighting = k, weighting

    def fit_arrays(self, x, target):
        y = target.reshape(len(target), -1).astype(np.float64)
        return {"train_x": x.astype(np.float64), "train_y": y}

    def predict(self, x):
        dist, idx = self.neighbours(x)
        w = self.weights(dist)[..., None]
        y = (self.train_y[idx] * w).sum(1) / w.sum(1)
        return self._shaped(y)


class KNNParams(Params):
    """What both k-NN blocks declare."""

    n_neighbors: int
    weights: str


class KNNClassifierParams(KNNParams):
    num_classes: int


def _knn(classifier: bool):
    def classify(p: KNNClassifierParams, x):
        _check_inputs(x, classifier=True)
        return KNNClassifier(p.num_classes, p.n_neighbors, p.weights)

    def regress(p: KNNParams, x):
        _check_inputs(x, classifier=False)
        return KNNRegressor(tuple(x["target"].shape[1:]) if "target" in x else (),
                            p.n_neighbors, p.weights)
    return classify if classifier else regress


KNN_PARAMS = [int_param("n_neighbors", 5, "k: how many training samples vote", min=1),
              choice_param("weights", ("uniform", "distance"), "uniform",
                           "each neighbour's say: equal, or 1/distance")]


# -- support vector machines -----------------------------------------------------------


class _Kernel:
    # buffers (STATE) and settings of the estimators this is mixed into
    support: torch.Tensor
    dual_coef: torch.Tensor
    intercept: torch.Tensor
    n_support: torch.Tensor
    classes: torch.Tensor
    gamma: torch.Tensor
    kernel: str
    degree: int
    coef0: float

    def gram(self, x: torch.Tensor) -> torch.Tensor:
        """K(x, support vectors), (N, S), in float64."""
        x, sv, g = x.double(), self.support, float(self.gamma)
        if self.kernel == "rbf":
            return torch.exp(-g * torch.cdist(x, sv) ** 2)
        dot = x @ sv.T
        if self.kernel == "linear":
            return dot
        if self.kernel == "poly":
            return (g * dot + self.coef0) ** self.degree
        return torch.tanh(g * dot + self.coef0)


class SVMClassifier(_Kernel, _Classifier):
    """One-vs-one votes of scikit-learn's SVC, as shares (N, num_classes): each pair of
    classes seen in training votes once; ties go to the lower class, as in libsvm."""

    STATE = ("support", "dual_coef", "intercept", "n_support", "classes", "gamma")

    def __init__(self, num_classes: int, make, kernel: str, degree: int, coef0: float):
        super().__init__(num_classes)
        self.make, self.kernel, self.degree, self.coef0 = make, kernel, degree, coef0

    def fit_arrays(self, x, target):
        est = self.make().fit(x, _labels(target, self.num_classes))
        dual, intercept = est.dual_coef_, est.intercept_
        if len(est.classes_) == 2:  # scikit-learn flips the binary pair's signs
            dual, intercept = -dual, -intercept
        return {"support": est.support_vectors_.astype(np.float64),
                "dual_coef": np.asarray(dual, np.float64),
                "intercept": np.asarray(intercept, np.float64),
                "n_support": est.n_support_.astype(np.int64),
                "classes": est.classes_.astype(np.int64),
                "gamma": np.asarray(est._gamma, np.float64)}

    def predict(self, x):
        k = self.gram(x)
        counts = self.n_support.tolist()
        starts = np.concatenate([[0], np.cumsum(counts)]).tolist()
        c = len(counts)
        votes = torch.zeros((x.shape[0], c), dtype=torch.float64, device=x.device)
        p = 0
        for i in range(c):
            si = slice(starts[i], starts[i + 1])
            for j in range(i + 1, c):
                sj = slice(starts[j], starts[j + 1])
                dec = (k[:, si] @ self.dual_coef[j - 1, si] + k[:, sj] @ self.dual_coef[i, sj]
                       + self.intercept[p])
                votes[:, i] += (dec > 0).double()
                votes[:, j] += (dec <= 0).double()
                p += 1
        out = torch.zeros((x.shape[0], self.num_classes), dtype=torch.float64,
                          device=x.device)
        out[:, self.classes] = votes / max(p, 1)
        return out.float()


class SVMRegressor(_Kernel, _Regressor):
    STATE = ("support", "dual_coef", "intercept", "gamma")

    def __init__(self, target_shape, make, kernel: str, degree: int, coef0: float):
        super().__init__(target_shape)
        self.make, self.kernel, self.degree, self.coef0 = make, kernel, degree, coef0

    def fit_arrays(self, x, target):
        est = self.make().fit(x, self._targets(target))
        return {"support": est.support_vectors_.astype(np.float64),
                "dual_coef": np.asarray(est.dual_coef_, np.float64),
                "intercept": np.asarray(est.intercept_, np.float64),
                "gamma": np.asarray(est._gamma, np.float64)}

    def predict(self, x):
        return self._shaped(self.gram(x) @ self.dual_coef[0] + self.intercept[0])


class SVMParams(Params):
    """What both SVM blocks declare."""

    kernel: str
    c: float
    gamma: float | None
    degree: int
    coef0: float


class SVMClassifierParams(SVMParams):
    num_classes: int


class SVMRegressorParams(SVMParams):
    epsilon: float


def _svm_kwargs(p: SVMParams) -> dict[str, Any]:
    return {"kernel": p.kernel, "C": p.c, "degree": p.degree, "coef0": p.coef0,
            "gamma": "scale" if p.gamma is None else p.gamma}


def _svm(classifier: bool):
    def classify(p: SVMClassifierParams, x):
        _check_inputs(x, classifier=True, single_output=True)

        def make():
            from sklearn.svm import SVC
            return SVC(**_svm_kwargs(p))
        return SVMClassifier(p.num_classes, make, p.kernel, p.degree, p.coef0)

    def regress(p: SVMRegressorParams, x):
        _check_inputs(x, classifier=False, single_output=True)

        def make():
            from sklearn.svm import SVR
            return SVR(epsilon=p.epsilon, **_svm_kwargs(p))
        return SVMRegressor(tuple(x["target"].shape[1:]) if "target" in x else (), make,
                            p.kernel, p.degree, p.coef0)
    return classify if classifier else regress


SVM_PARAMS = [choice_param("kernel", ("rbf", "linear", "poly", "sigmoid"), "rbf",
                           "the kernel k(x, x′)"),
              float_param("c", 1.0, "C: the inverse strength of the margin penalty", min=0),
              float_param("gamma", None, "kernel width γ; empty: 1/(F·var(x)) "
                          "(scikit-learn's 'scale')", min=0, nullable=True),
              int_param("degree", 3, "degree of the poly kernel", min=1),
              float_param("coef0", 0.0, "constant of the poly and sigmoid kernels")]


def _no_export(p, x):
    """The Python export's answer for an estimator: a plain PyTorch script has no fit."""
    from nodegraph.model.errors import Unexportable

    raise Unexportable("an estimator is fitted by scikit-learn when nodegraph runs the "
                       "graph, a step a plain PyTorch script does not have; run the graph "
                       "with nodegraph")


KEYWORDS = ("sklearn", "scikit-learn", "non-differentiable", "estimator")
CLS = "\n\nFits on the train split when the graph runs; outputs class probabilities."
REG = "\n\nFits on the train split when the graph runs; outputs values shaped like the target."

BLOCKS = [
    estimator("estimators.DecisionTreeClassifier",
              "A decision tree: splits on one feature at a time, pruned by cost complexity."
              + CLS + " `ccp_alpha` > 0 cuts the branches whose impurity gain per leaf is below "
              "it; the node view draws the tree and the pruning path (accuracy vs α).",
              _tree_classifier(False), **PORTS, export=_no_export,
              params=[NUM_CLASSES, choice_param("criterion", ("gini", "entropy", "log_loss"),
                                                "gini", "impurity a split lowers"),
                      *_tree_params(False)],
              keywords=(*KEYWORDS, "tree", "cart", "pruning", "ccp")),
    estimator("estimators.DecisionTreeRegressor",
              "A regression tree: piecewise-constant predictions from feature splits." + REG,
              _tree_regressor(False), **PORTS, export=_no_export,
              params=[choice_param("criterion", ("squared_error", "absolute_error",
                                                 "friedman_mse"), "squared_error",
                                   "error a split lowers"), *_tree_params(False)],
              keywords=(*KEYWORDS, "tree", "cart", "regression")),
    estimator("estimators.RandomForestClassifier",
              "A random forest: trees on bootstrap samples and random feature subsets, their "
              "class probabilities averaged." + CLS,
              _tree_classifier(True), **PORTS, export=_no_export,
              params=[NUM_CLASSES, choice_param("criterion", ("gini", "entropy", "log_loss"),
                                                "gini", "impurity a split lowers"),
                      *_tree_params(True)],
              keywords=(*KEYWORDS, "forest", "bagging", "ensemble")),
    estimator("estimators.RandomForestRegressor",
              "A random forest of regression trees, their predictions averaged." + REG,
              _tree_regressor(True), **PORTS, export=_no_export,
              params=[choice_param("criterion", ("squared_error", "absolute_error",
                                                 "friedman_mse"), "squared_error",
                                   "error a split lowers"), *_tree_params(True, "all")],
              keywords=(*KEYWORDS, "forest", "bagging", "ensemble", "regression")),
    estimator("estimators.GradientBoostingClassifier",
              "Histogram gradient boosting: trees fitted one after another to the gradient of "
              "the log loss (scikit-learn's HistGradientBoostingClassifier)." + CLS,
              _boosting(True), **PORTS, export=_no_export, params=[NUM_CLASSES, *HGB_PARAMS],
              keywords=(*KEYWORDS, "boosting", "gbdt", "gbm", "ensemble", "hist")),
    estimator("estimators.GradientBoostingRegressor",
              "Histogram gradient boosting for regression (HistGradientBoostingRegressor)."
              + REG, _boosting(False), **PORTS, export=_no_export,
              params=[choice_param("loss", ("squared_error", "absolute_error"), "squared_error",
                                   "the loss each round descends"), *HGB_PARAMS],
              keywords=(*KEYWORDS, "boosting", "gbdt", "gbm", "ensemble", "regression")),
    estimator("estimators.KNNClassifier",
              "k nearest neighbours: the classes of the k closest training samples vote."
              + CLS + " The fit keeps the training set; distances are Euclidean.",
              _knn(True), **PORTS, export=_no_export, params=[NUM_CLASSES, *KNN_PARAMS],
              keywords=(*KEYWORDS, "knn", "nearest neighbors", "instance based")),
    estimator("estimators.KNNRegressor",
              "k nearest neighbours regression: the mean target of the k closest training "
              "samples." + REG, _knn(False), **PORTS, export=_no_export, params=KNN_PARAMS,
              keywords=(*KEYWORDS, "knn", "nearest neighbors", "regression")),
    estimator("estimators.SVMClassifier",
              "A kernel support vector machine (scikit-learn's SVC), one-vs-one for several "
              "classes.\n\nFits on the train split when the graph runs; outputs each class's "
              "share of the pairwise votes (argmax is the SVC's prediction), not probabilities.",
              _svm(True), **PORTS, export=_no_export, params=[NUM_CLASSES, *SVM_PARAMS],
              keywords=(*KEYWORDS, "svm", "svc", "kernel trick", "rbf", "margin")),
    estimator("estimators.SVMRegressor",
              "Kernel support vector regression (scikit-learn's SVR): an ε-insensitive tube."
              + REG, _svm(False), **PORTS, export=_no_export,
              params=[*SVM_PARAMS, float_param("epsilon", 0.1, "half-width of the tube inside "
                                               "which errors cost nothing", min=0)],
              keywords=(*KEYWORDS, "svm", "svr", "kernel trick", "regression")),
]
