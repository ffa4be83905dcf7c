"""Trees, a forest, boosting and an MLP side by side on one data block.

Decision trees are often taught only in passing: they are not differentiable, yet they are
what a network is measured against on tabular data. All four models read the same
breast-cancer split (60/20/20,
stratified, z-scored with the training statistics): the tree, pruned by cost complexity
(ccp_alpha), the random forest and the histogram gradient boosting fit once on the train
split when the graph runs; the MLP trains by Adam over the epochs. Each feeds its own
accuracy block, so one run prints the four test accuracies next to each other; the tree
also feeds a confusion matrix and ECE (its leaves give probabilities).

    python examples/builders/trees_vs_mlp.py
"""

from __future__ import annotations

from _classic import save_all, wire

from nodegraph.model.graph import Graph

MODELS = {"tree": ("estimators.DecisionTreeClassifier", {"max_depth": 5, "ccp_alpha": 0.01}),
          "forest": ("estimators.RandomForestClassifier", {"n_estimators": 100}),
          "boosting": ("estimators.GradientBoostingClassifier", {"max_iter": 100})}


def build() -> dict[str, Graph]:
    g = Graph("trees-vs-mlp")
    g.add("data.BreastCancer", id="data", target="class", val_fraction=0.2,
          test_fraction=0.2, batch_size=32)
    for name, (block, params) in MODELS.items():
        g.add(block, id=name, num_classes=2, **params)
        wire(g, f"data.x -> {name}.input", f"data.y -> {name}.target")
    g.add("layers.Linear", id="hidden", out_features=32)
    g.add("activations.ReLU", id="relu")
    g.add("layers.Linear", id="mlp", out_features=2)
    g.add("losses.CrossEntropy", id="ce")
    g.add("optimizers.Adam", id="opt", lr=0.003)
    wire(g, "data.x -> hidden.input", "hidden.output -> relu.input",
         "relu.output -> mlp.input", "mlp.output -> ce.input", "data.y -> ce.target",
         "ce.loss -> opt.loss")
    for name in [*MODELS, "mlp"]:
        g.add("metrics.Accuracy", id=f"{name}_acc")
        wire(g, f"{name}.output -> {name}_acc.input", f"data.y -> {name}_acc.target")
    g.add("metrics.ConfusionMatrix", id="tree_confusion")
    g.add("metrics.ECE", id="tree_ece", scores="probabilities", n_bins=10)
    wire(g, "tree.output -> tree_confusion.input", "data.y -> tree_confusion.target",
         "tree.output -> tree_ece.input", "data.y -> tree_ece.target")
    g.update_training(epochs=30, seed=0, device="auto")
    return {"trees_vs_mlp": g}


if __name__ == "__main__":
    save_all(build())
