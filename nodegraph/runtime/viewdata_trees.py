"""What the tree views draw, computed without Qt: a fitted tree laid out, the pruning path,
and a regularisation path's frames as curves.

`fitted_tree` reads a tree estimator's buffers (the arrays `nodes.estimators` keeps: a
forest shows its first tree) and places each node: leaves evenly along x in their
left-to-right order, an inner node midway over its children, depth down y. `pruning_path`
refits the tree on the train split for each α of scikit-learn's cost-complexity pruning
path and scores it on every split — accuracy for a classifier, R² for a regressor — the
curve that shows where pruning stops helping. `weight_path` turns the frames of
procedures.RegularizationPath into one curve per weight against the penalty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nodegraph.kinds.estimator import Estimator, estimator_steps, split_inputs
from nodegraph.model.errors import NodegraphError

TREE_STATE = ("left", "right", "feature", "threshold", "value", "impurity", "samples")


@dataclass(frozen=True)
class FittedTree:
    """One fitted tree, laid out: per node its position, split and summary."""

    x: np.ndarray  # (M,) horizontal position, leaves at 0, 1, 2, ...
    depth: np.ndarray  # (M,) 0 at the root
    left: np.ndarray  # (M,) child ids, −1 at a leaf
    right: np.ndarray
    feature: np.ndarray  # (M,) split feature (inner nodes)
    threshold: np.ndarray  # (M,) go left where x[feature] <= threshold
    value: np.ndarray  # (M, K) class fractions or predicted values
    impurity: np.ndarray
    samples: np.ndarray
    classifier: bool
    trees: int  # how many trees the block holds (a forest: this is the first)
    labels: list[str] = field(default_factory=list)  # one caption per node

    @property
    def leaves(self) -> int:
        return int((self.left < 0).sum())

    @property
    def edges(self) -> list[tuple[int, int]]:
        return [(i, int(c)) for i in range(len(self.left)) for c in (self.left[i],
                                                                      self.right[i]) if c >= 0]


def is_tree(module) -> bool:
    return isinstance(module, Estimator) and "impurity" in module.STATE


def fitted_tree(compiled, node: str, index: int = 0) -> FittedTree:
    """Tree `index` of estimator `node`, laid out for drawing; an error when unfitted."""
    module = compiled.module.module_of(node)
    if not is_tree(module):
        raise NodegraphError(f"'{node}' is not a tree estimator")
    if not bool(module.fitted):
        raise NodegraphError(f"'{node}' is not fitted yet: train the graph (the tree fits on "
                             "the train split when the run starts)")
    a = module.arrays()
    reach = _reachable(a["left"][index], a["right"][index])
    ids = {old: new for new, old in enumerate(reach)}

    def take(name):
        return a[name][index][reach]

    def relink(children):
        return np.array([ids[int(c)] if c >= 0 else -1 for c in children], dtype=np.int64)

    left, right = relink(take("left")), relink(take("right"))
    depth, x = _layout(left, right)
    classifier = hasattr(module, "num_classes")
    tree = FittedTree(x, depth, left, right, take("feature"), take("threshold"),
                      take("value"), take("impurity"), take("samples"), classifier,
                      int(a["left"].shape[0]))
    tree.labels.extend(_label(tree, i) for i in range(len(left)))
    return tree


def _reachable(left: np.ndarray, right: np.ndarray) -> list[int]:
    """Node ids reachable from the root, depth first (padding rows of a forest are not)."""
    out, todo = [], [0]
    while todo:
        n = todo.pop()
        out.append(n)
        todo += [int(c) for c in (right[n], left[n]) if c >= 0]
    return out


def _layout(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    depth = np.zeros(len(left), dtype=np.int64)
    x = np.zeros(len(left))
    next_leaf = [0.0]

    def place(n: int, d: int) -> None:  # iterative enough: trees here are small
        depth[n] = d
        if left[n] < 0:
            x[n] = next_leaf[0]
            next_leaf[0] += 1
            return
        place(int(left[n]), d + 1)
        place(int(right[n]), d + 1)
        x[n] = (x[left[n]] + x[right[n]]) / 2

    place(0, 0)
    return depth, x


def _label(t: FittedTree, i: int) -> str:
    v = t.value[i]
    summary = (f"class {int(v.argmax())} ({v.max():.2f})" if t.classifier
               else f"ŷ = {v[0]:.3g}")
    head = "" if t.left[i] < 0 else f"x[{int(t.feature[i])}] ≤ {t.threshold[i]:.3g}\n"
    return f"{head}{summary}\nn = {int(t.samples[i])}"


@dataclass(frozen=True)
class PruningPath:
    """Score against the cost-complexity α, one curve per split."""

    alphas: list[float]
    scores: dict[str, list[float]]  # split -> score per α
    leaves: list[int]
    metric: str  # "accuracy" or "R²"
    current: float  # the block's ccp_alpha


def pruning_path(compiled, node: str, max_points: int = 40) -> PruningPath:
    """Refit the tree of `node` on the train split for each α of scikit-learn's pruning
    path (at most `max_points` of them, evenly spread) and score every split."""
    module = compiled.module.module_of(node)
    if not is_tree(module) or int(module.left.shape[0] if module.left.ndim else 1) > 1 \
            or not hasattr(module, "make"):
        raise NodegraphError(f"'{node}' is not a single decision tree")
    from sklearn.metrics import r2_score

    in_keys = next(k for n, _, k in estimator_steps(compiled) if n == node)
    data = {}
    for split in ("train", "val", "test"):
        if all(ds.has(split) for ds in compiled.datasets.values()):
            xt, yt = split_inputs(compiled, node, in_keys, split)
            if xt is None or yt is None:
                raise NodegraphError(f"'{node}' needs its inputs and target wired to show "
                                     "its pruning path")
            data[split] = (xt.detach().cpu().numpy(),
                           yt.detach().cpu().numpy().reshape(len(yt), -1))
    if "train" not in data:
        raise NodegraphError("the data has no train split")
    classifier = hasattr(module, "num_classes")
    x, y = data["train"]
    y = y[:, 0].astype(np.int64) if classifier else (y[:, 0] if y.shape[1] == 1 else y)
    base = module.make()
    current = float(base.get_params()["ccp_alpha"])
    alphas = base.set_params(ccp_alpha=0.0).cost_complexity_pruning_path(x, y).ccp_alphas
    alphas = np.maximum(alphas, 0.0)
    if len(alphas) > max_points:
        alphas = alphas[np.unique(np.linspace(0, len(alphas) - 1, max_points).round()
                                  .astype(int))]
    scores: dict[str, list[float]] = {s: [] for s in data}
    leaves = []
    for alpha in alphas:
        tree = module.make().set_params(ccp_alpha=float(alpha)).fit(x, y)
        leaves.append(int(tree.get_n_leaves()))
        for split, (xs, ys) in data.items():
            truth = ys[:, 0] if ys.shape[1] == 1 else ys
            pred = tree.predict(xs)
            scores[split].append(float((pred == truth).mean()) if classifier
                                 else float(r2_score(truth, pred)))
    return PruningPath([float(a) for a in alphas], scores, leaves,
                       "accuracy" if classifier else "R²", current)



@dataclass(frozen=True)
class WeightPath:
    """Each weight of a model against the penalty value (procedures.RegularizationPath)."""

    values: list[float]
    weights: np.ndarray  # (V, W)
    losses: dict[str, list[float | None]]


def weight_path(frames: list[dict]) -> WeightPath:
    if not frames or "weights" not in frames[0]:
        raise NodegraphError("these frames are not a regularisation path")
    losses = {k.removesuffix("_loss"): [f.get(k) for f in frames]
              for k in frames[0] if k.endswith("_loss")}
    return WeightPath([float(f["value"]) for f in frames],
                      np.array([f["weights"] for f in frames], dtype=float), losses)
