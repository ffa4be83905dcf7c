"""Which runs make the figures of the READMEs, and how each number is read and printed.

`tools/example_figures.py` runs each entry of `EXAMPLES` and writes the numbers between
the `<!--fig:RUN.FIGURE-->` markers of examples/README.md and README.md. A run is an
example's file, optionally with params set (`sets`, as `--set` would), trained through
`nodegraph.train` on the CPU with one torch thread (the automatic thread count follows the
machine's load, and a different count sums in another order), or only compiled for a
parameter count, or trained and then asked for a procedure's frames (`nodegraph sample`).
`slow=True` marks a run that takes more than ~20 s on the shared machine: it is not rerun
in CI, its figures carry a fingerprint instead (see `example_figures.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

Read = Callable[[Any], float]
Show = Callable[[float], str]

# torch intra-op threads of every run: 1 for the figures; `tools/figure_spread.py` sets
# others to see how far a different summation order moves each figure
THREADS = 1
# the seed of every trained run, when set (None: the file's): the spread over seeds
SEED: int | None = None


def number(digits: int) -> Show:
    """Fixed decimals, with the typographic minus the README uses."""
    return lambda v: f"{v:.{digits}f}".replace("-", "−")


def count(v: float) -> str:
    return f"{int(round(v)):,}"


def percent(digits: int) -> Show:
    """A fraction as a percentage without the sign: 0.955 -> 95.5."""
    return lambda v: f"{100 * v:.{digits}f}"


def sci(digits: int) -> Show:
    """Scientific notation as the README writes it: 7.5·10⁻⁵."""
    sup = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")

    def show(v: float) -> str:
        mantissa, exponent = f"{v:.{digits}e}".split("e")
        return f"{mantissa}·10{str(int(exponent)).translate(sup)}".replace("-", "−")
    return show


class Figure(NamedTuple):
    """One number of a run: how to read it from what the run made, and how to print it.
    `tolerance` > 0 (with `why`) widens the measured one (`tools/figure_spread.json`).
    An index a run picks (the best epoch) has `picks`, the number at an index, and `like`,
    the figure whose tolerance that number gets: another CPU may pick another epoch of
    nearly the same value, so the check compares the values at both epochs, not the index."""

    read: Read
    show: Show
    tolerance: float = 0.0
    why: str = ""
    picks: Callable[[Any, int], float] | None = None
    like: str = ""


# -- how a run is made ------------------------------------------------------------------


def trained(epochs: int | None = None, seed: int | None = None) -> Callable[[Any], Any]:
    """The graph trained as its file says (or with these epochs / seed), one thread."""
    def run(graph: Any) -> Any:
        import nodegraph

        return nodegraph.train(graph, epochs=epochs,
                               seed=seed if SEED is None else SEED, threads=THREADS)
    return run


def with_data(run: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`run` after `examples/make_data.py` has written the file-format examples' data
    (seeded generators; a set already there is kept)."""
    def prepared(graph: Any) -> Any:
        import importlib.util

        root = Path(__file__).resolve().parent.parent
        spec = importlib.util.spec_from_file_location("make_data",
                                                      root / "examples" / "make_data.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.ensure()
        return run(graph)
    return prepared


def seeds(*values: int) -> Callable[[Any], Any]:
    """The graph trained once per seed: a list of runs, read with `of` and `mean`."""
    def run(graph: Any) -> Any:
        import nodegraph

        return [nodegraph.train(graph, seed=s, threads=THREADS) for s in values]
    return run


def compiled(graph: Any) -> Any:
    """Compiled only: for parameter counts."""
    import nodegraph

    return nodegraph.compile(graph)


def sampled(node: str, train: bool = True, **overrides: Any) -> Callable[[Any], Any]:
    """The frames of procedure `node` (after training, as `nodegraph sample --train`)."""
    def run(graph: Any) -> Any:
        import nodegraph
        from nodegraph.runtime.procedure import run_procedure

        target = (nodegraph.train(graph, seed=SEED, threads=THREADS).compiled if train
                  else nodegraph.compile(graph, for_training=False))
        return run_procedure(target, node, **overrides)
    return run


class Example:
    """How one run is made, and its figures by name ((read, show) pairs become Figures)."""

    def __init__(self, file: str, slow: bool,
                 figures: Mapping[str, Figure | tuple[Any, ...]],
                 run: Callable[[Any], Any] | None = None,
                 sets: Mapping[str, Any] | None = None, long: bool = False,
                 depends: tuple[str, ...] = ()) -> None:
        self.file = file
        self.slow = slow  # takes more than ~20 s here: regenerated with --slow, recorded
        self.figures: dict[str, Figure] = {k: Figure(*v) for k, v in figures.items()}
        self.run = run or trained()
        self.sets = dict(sets or {})  # "node.param" -> value, as --set
        # fast, but beyond the ~60 s of CPU that `make test` gives the check: rerun by the
        # test marked slow (CI's own step) instead
        self.long = long
        # files beside the graph a run depends on (a data generator), for the fingerprint
        self.depends = depends


# -- how a number is read ---------------------------------------------------------------


def final(split: str, key: str) -> Read:
    """A number of the run's final evaluation."""
    return lambda run: run.final[split][key]


def at_epoch(epoch: int, split: str, key: str) -> Read:
    """A number of the history after `epoch` (1-based)."""
    return lambda run: run.history[epoch - 1][split][key]


def weight(node: str, name: str, index: int = 0) -> Read:
    """One scalar weight of a trained node (flat index)."""
    return lambda run: float(getattr(run.module.module_of(node), name).detach()
                             .reshape(-1)[index])


def output(node: str, index: int = 0, port: str = "output", split: str = "train",
           then: Callable[[Any], Any] | None = None) -> Read:
    """One value (flat index) of an output of the trained graph on `split`'s first batch;
    `then` maps the tensor first (a sigmoid, say)."""
    def read(run: Any) -> float:
        import nodegraph

        values = nodegraph.forward(run.compiled.graph, compiled=run.compiled, split=split)
        tensor = values[(node, port)].detach()
        return float((then(tensor) if then else tensor).reshape(-1)[index])
    return read


def of(index: int, read: Read) -> Read:
    """`read` from run `index` of a `seeds` run."""
    return lambda runs: read(runs[index])


def mean(read: Read) -> Read:
    """The mean of `read` over the runs of a `seeds` run."""
    return lambda runs: sum(read(r) for r in runs) / len(runs)


def params(made: Any) -> float:
    """Trainable parameters of a compiled graph (or a trained run's)."""
    return (made.compiled if hasattr(made, "compiled") else made).parameter_count()


def sigmoid(t: Any) -> Any:
    return t.sigmoid()


# -- readers that need a few lines --------------------------------------------------------


def theta_original(index: int) -> Read:
    """(intercept, w_age, w_bmi) of cholesterol_lbfgs.json in the inputs' original units:
    its data block z-scores the inputs with the training rows' mean and population std."""
    def read(run: Any) -> float:
        import numpy as np

        linear = run.module.module_of("linear")
        w = linear.weight.detach().double().numpy()[0]
        b = float(linear.bias.detach())
        rows = run.compiled.graph.node("data").params["rows"]
        x = np.array([r[:2] for r in rows if r[3] == "train"], dtype=np.float64)
        mean, std = x.mean(0), x.std(0)
        return [b - float((w * mean / std).sum()), *(w / std)][index]
    return read


def svm_margin(run: Any) -> float:
    """1/‖θ₊‖, the soft margin's half width."""
    return 1.0 / float(run.module.module_of("linear").weight.detach().norm())


def svm_inside(run: Any) -> float:
    """Training points on or inside the margin, y·f(x) < 1 (labels 0/1 taken as ∓1)."""
    import nodegraph

    values = nodegraph.forward(run.compiled.graph, compiled=run.compiled)
    f = values[("linear", "output")].detach().reshape(-1)
    y = values[("data", "y")].detach().reshape(-1).float()
    y = y * 2 - 1 if bool(((y == 0) | (y == 1)).all()) else y
    return float(((y * f) < 1).sum())


def wrong(split: str, key: str, total: int) -> Read:
    """How many of `total` samples an accuracy says were wrong."""
    return lambda run: (1 - run.final[split][key]) * total


def free_run_mse(run: Any) -> float:
    """Mean squared error of 30-step recursive forecasts from test windows 0, 20, ..., 80
    (`procedures.RecursiveForecast` `forecast`), on the series' [0, 1] scale."""
    from nodegraph.runtime.procedure import run_procedure

    errors = []
    for start in (0, 20, 40, 60, 80):
        frames = run_procedure(run.compiled, "forecast", start=start)
        errors += [sum((p - t) ** 2 for p, t in zip(f["prediction"], f["target"], strict=True))
                   / len(f["target"]) for f in frames]
    return sum(errors) / len(errors)


def best_epoch(split: str, key: str) -> Read:
    """The (1-based) epoch whose `split` `key` was lowest."""
    return lambda run: min(range(len(run.history)),
                           key=lambda i: run.history[i][split][key]) + 1


def lowest(split: str, key: str) -> Read:
    return lambda run: min(h[split][key] for h in run.history)


def frame(index: int, key: str, item: int | None = None) -> Read:
    """Value `key` of procedure frame `index` (item `item` of a list)."""
    def read(frames: Any) -> float:
        value = frames[index][key]
        return float(value if item is None else value[item])
    return read


def _poly(degree: int, train: Show, test: Show) -> Example:
    return Example("poly_bias_variance.json", False, {
        "train_mse": (final("train", "mse"), train), "test_mse": (final("test", "mse"), test)},
        sets={"poly.degree": degree})


def _race(file: str, noise: int, epochs: tuple[int, ...], digits: int = 3,
          **extra: Figure | tuple) -> Example:
    figures: dict[str, Figure | tuple] = {
        f"train_mse_{e}": (at_epoch(e, "train", "mse"), number(digits)) for e in epochs}
    return Example(file, False, {**figures, **extra}, sets={"data.noise": noise})


def _detection(name: str) -> dict[str, Example]:
    """Two runs of a detection example: its parameter count (compiled, fast) and the
    trained mAPs (slow)."""
    maps = {f"{split}_{key}": (final(split, f"map.{key}"), number(3))
            for split, keys in (("train", ("map_50", "map")), ("val", ("map_50", "map")),
                                ("test", ("map_50", "map_75", "map")))
            for key in keys}
    return {f"{name}_size": Example(f"{name}.json", False, {"params": (params, count)},
                                    run=compiled),
            name: Example(f"{name}.json", True, maps)}


FULL_DATA: dict[str, dict[str, Any]] = {
    "cifar_cnn": {"data.path": "data/full/cifar-10-batches-bin"},
    "parquet_churn": {"data.path": "data/full/customers.parquet"},
    "hf_signals": {"data.path": "data/full/signals_hf"},
    "webdataset_signals": {"data.shards": "data/full/signals_wds/train-{000..007}.tar",
                           "data.val_shards": "data/full/signals_wds/val-000.tar"},
    "bpe_transformer": {"data.path": "data/full/corpus.txt"},
}

EXAMPLES: dict[str, Example] = {
    # -- first graphs
    "xor": Example("xor.json", False, {
        "train_accuracy": (final("train", "accuracy"), number(1)),
        "train_loss": (final("train", "loss"), number(4)),
        "p01": (output("out", 1, then=sigmoid), number(4)),
        "p11": (output("out", 3, then=sigmoid), number(4))}),
    "line_fit": Example("line_fit.json", False, {
        "slope": (weight("line", "weight"), number(3)),
        "intercept": (weight("line", "bias"), number(3)),
        "train_mse": (final("train", "loss"), number(4)),
        "val_mse": (final("val", "loss"), number(4))}),
    # -- regression and classification
    "cholesterol": Example("cholesterol.json", False, {
        "theta0": (weight("linear", "bias"), number(3)),
        "theta_age": (weight("linear", "weight", 0), number(4)),
        "theta_bmi": (weight("linear", "weight", 1), number(4)),
        "train_mse": (final("train", "mse"), number(3)),
        "test_mse": (final("test", "mse"), number(2)),
        "train_r2": (final("train", "r2"), number(4)),
        "test_r2": (final("test", "r2"), number(4)),
        "train_r2_explained": (final("train", "r2_explained"), number(4)),
        "test_r2_explained": (final("test", "r2_explained"), number(4))}),
    "cholesterol_lbfgs": Example("cholesterol_lbfgs.json", False, {
        "theta0": (theta_original(0), number(3)),
        "theta_age": (theta_original(1), number(4)),
        "theta_bmi": (theta_original(2), number(4))}),
    "poly_d1": _poly(1, number(3), number(3)),
    "poly_d3": _poly(3, number(3), number(3)),
    "poly_d5": _poly(5, number(3), number(3)),
    "poly_d10": _poly(10, number(3), number(2)),
    "poly_d15": _poly(15, number(3), number(0)),
    "logistic_binary": Example("logistic_binary.json", False, {
        "train_bce": (final("train", "bce"), number(4)),
        "train_accuracy": (final("train", "accuracy"), number(3)),
        "test_accuracy": (final("test", "accuracy"), number(3)),
        "train_ece": (final("train", "ece.ece"), number(3)),
        "test_ece": (final("test", "ece.ece"), number(3))}),
    "softmax_regression": Example("softmax_regression.json", False, {
        "objective": (final("train", "objective"), number(4)),
        "train_accuracy": (final("train", "accuracy"), number(3)),
        "val_accuracy": (final("val", "accuracy"), number(3)),
        "test_accuracy": (final("test", "accuracy"), number(3)),
        "test_ece": (final("test", "ece.ece"), number(3))}),
    "svm_hinge": Example("svm_hinge.json", False, {
        "objective": (final("train", "objective"), number(4)),
        "w1": (weight("linear", "weight", 0), number(3)),
        "w2": (weight("linear", "weight", 1), number(3)),
        "bias": (weight("linear", "bias"), number(3)),
        "train_accuracy": (final("train", "accuracy"), number(3)),
        "train_wrong": (wrong("train", "accuracy", 150), count),
        "test_accuracy": (final("test", "accuracy"), number(1)),
        "inside": (svm_inside, count),
        "margin": (svm_margin, number(2))}),
    "svm_hinge_wide": Example("svm_hinge.json", False, {
        "margin": (svm_margin, number(2)), "inside": (svm_inside, count)},
        sets={"svm_l2.weight": 0.05}),
    "race_gd": _race("optimizer_race.json", 0, (20, 100)),
    "race_sgd": _race("optimizer_race_sgd.json", 0, (20, 100)),
    "race_nesterov": _race("optimizer_race_nesterov.json", 0, (20, 100)),
    "race_adam": _race("optimizer_race_adam.json", 0, (20, 100)),
    "race_lbfgs": _race("optimizer_race_lbfgs.json", 0, (10,), digits=4),
    "race_lbfgs_25": Example("optimizer_race_lbfgs.json", False, {
        "train_mse": (final("train", "mse"), number(4))}, sets={"data.noise": 25}),
    "race_gd_25": Example("optimizer_race.json", False, {
        "train_mse": (final("train", "mse"), number(3))}, sets={"data.noise": 25}),
    "race_lbfgs_100": Example("optimizer_race_lbfgs.json", False, {
        "best_epoch": Figure(best_epoch("val", "mse"), count,
                             picks=lambda run, e: run.history[e - 1]["val"]["mse"],
                             like="best_val_mse"),
        "best_val_mse": (lowest("val", "mse"), number(3)),
        "val_mse": (final("val", "mse"), number(3))}, sets={"data.noise": 100}),
    "race_lr_small": Example("optimizer_race.json", False, {
        "train_mse": (final("train", "mse"), number(3))},
        run=trained(epochs=50), sets={"opt.lr": 0.002}),
    "race_lr_right": Example("optimizer_race.json", False, {
        "train_mse": (final("train", "mse"), number(3))},
        run=trained(epochs=50), sets={"opt.lr": 0.2}),
    # -- sequences and attention
    "timeseries_mlp": Example("timeseries_mlp.json", False, {
        "test_mse": (final("test", "loss"), sci(1)),
        "free_run_mse": (free_run_mse, number(3))}),
    "timeseries_lstm": Example("timeseries_lstm.json", False, {
        "test_mse": (final("test", "loss"), sci(1)),
        "free_run_mse": (free_run_mse, number(3))}),
    "timeseries_mlp_quick": Example("timeseries_mlp.json", False, {
        "free_run_mse": (free_run_mse, number(3))}, run=trained(epochs=40)),
    "timeseries_lstm_quick": Example("timeseries_lstm.json", False, {
        "free_run_mse": (free_run_mse, number(3))}, run=trained(epochs=30)),
    "char_transformer": Example("char_transformer.json", False, {
        "train_loss": (final("train", "loss"), number(2)),
        "val_loss": (final("val", "loss"), number(2))}, run=trained(epochs=10), long=True),
    "gcn_karate": Example("gcn_karate.json", False, {
        "train_accuracy": (final("train", "accuracy"), number(1)),
        "val_accuracy": (final("val", "accuracy"), number(1)),
        "test_accuracy": (final("test", "accuracy"), number(1))}),
    "gcn_karate_100": Example("gcn_karate.json", False, {
        "test_accuracy": (final("test", "accuracy"), number(1))}, run=trained(epochs=100)),
    # -- generative models
    **{f"autoencoder_{h}": Example("autoencoder.json", False, {
        "test_mse": (final("test", "mse"), number(4))}, sets={"enc.out_features": h})
       for h in (16, 32, 64, 128)},
    "stacked_autoencoder": Example("stacked_autoencoder.json", False, {
        "test_accuracy": (final("test", "accuracy"), number(3))}),
    "stacked_autoencoder_frozen": Example("stacked_autoencoder_frozen.json", False, {
        "test_accuracy": (final("test", "accuracy"), number(3))}),
    "vae_digits": Example("vae_digits.json", False, {
        "val_elbo_first": (at_epoch(1, "val", "elbo"), number(1)),
        "val_elbo": (final("val", "elbo"), number(1)),
        "test_elbo": (final("test", "elbo"), number(1)),
        "test_nll": (final("test", "nll"), number(1)),
        "test_kl": (final("test", "kl"), number(1))}, long=True),
    "gan_digits_size": Example("gan_digits.json", False, {"params": (params, count)},
                               run=compiled),
    "gan_digits": Example("gan_digits.json", False, {
        "d_loss": (final("train", "d_loss"), number(2)),
        "g_loss": (final("train", "g_loss"), number(2))}, run=trained(epochs=30), long=True),
    "dcgan_digits_size": Example("dcgan_digits.json", False, {"params": (params, count)},
                                 run=compiled),
    "ddpm_toy": Example("ddpm_toy.json", False, {
        "train_loss": (final("train", "loss"), number(2)),
        "val_loss": (final("val", "loss"), number(2))}, long=True),
    "ddpm_toy_quick": Example("ddpm_toy.json", False, {
        "train_loss_first": (at_epoch(1, "train", "loss"), number(2)),
        "train_loss": (final("train", "loss"), number(2))}, run=trained(epochs=40)),
    "ddpm_digits_size": Example("ddpm_digits.json", False, {"params": (params, count)},
                                run=compiled),
    "realnvp_moons": Example("realnvp_moons.json", False, {
        "val_nll": (final("val", "nll"), number(2)),
        "train_nll": (final("train", "nll"), number(2))}, long=True),
    "realnvp_moons_quick": Example("realnvp_moons.json", False, {
        "val_nll_first": (at_epoch(1, "val", "nll"), number(2)),
        "val_nll": (final("val", "nll"), number(2))}, run=trained(epochs=30), long=True),
    # -- energy-based models
    "hopfield_2d": Example("hopfield_2d.json", False, {
        "iterations": (final("train", "iterations"), number(1))}),
    "hopfield_3d": Example("hopfield_3d.json", False, {
        "iterations": (final("train", "iterations"), number(1))}),
    "rbm_digits_6": Example("rbm_digits.json", False, {
        "val_pl_first": (at_epoch(1, "val", "pl_rbm"), number(1)),
        "val_pl": (final("val", "pl_rbm"), number(1))}, run=trained(epochs=6)),
    "rbm_digits": Example("rbm_digits.json", False, {
        "val_pl": (final("val", "pl_rbm"), number(2))}),
    "dbm_digits": Example("dbm_digits.json", False, {
        "val_pl1_first": (at_epoch(1, "val", "pl_rbm1"), number(1)),
        "val_pl1_10": (at_epoch(10, "val", "pl_rbm1"), number(1)),
        "val_pl2_11": (at_epoch(11, "val", "pl_rbm2"), number(1)),
        "val_pl2": (final("val", "pl_rbm2"), number(1)),
        "val_pl1": (final("val", "pl_rbm1"), number(2))}, long=True),
    # -- networks
    "mlp_212": Example("mlp_212.json", False, {
        "hidden": (output("hidden"), number(1)),
        "out1": (output("out", 0), number(2)),
        "out2": (output("out", 1), number(2)),
        "loss": (final("train", "loss"), sci(0))}),
    "backprop_before": Example("backprop_appendix.json", False, {
        "xi1": (output("out", 0), number(3)),
        "xi2": (output("out", 1), number(3)),
        "xi3": (output("out", 2), number(3)),
        "loss": (final("train", "loss"), number(3))}, run=trained(epochs=0)),
    "backprop_appendix": Example("backprop_appendix.json", False, {
        "loss": (final("train", "loss"), number(3)),
        **{f"w2_{i}": (weight("out", "bias" if i == 0 else "weight", max(i - 1, 0)),
                       number(3)) for i in range(3)},
        **{f"w1_{i}": (weight("hidden", "bias" if i % 3 == 0 else "weight",
                              i // 3 if i % 3 == 0 else 2 * (i // 3) + i % 3 - 1), number(3))
           for i in range(6)}}),
    "conv_arithmetic": Example("conv_arithmetic.json", False, {
        f"out{i}": (output("flat", i), count) for i in range(4)}),
    "edge_detection": Example("edge_detection.json", False, {
        f"out{i}": (output("flat", i), count) for i in range(4)}),
    "cnn_digits_size": Example("cnn_digits.json", False, {"params": (params, count)},
                               run=compiled),
    "deep_sigmoid": Example("deep_sigmoid.json", False, {
        "val_accuracy": (final("val", "accuracy"), percent(1))}),
    "deep_sigmoid_xavier": Example("deep_sigmoid_xavier.json", False, {
        "val_accuracy": (final("val", "accuracy"), percent(1))}),
    "deep_tanh_xavier": Example("deep_tanh_xavier.json", False, {
        "val_accuracy": (final("val", "accuracy"), percent(1))}),
    "deep_relu_he": Example("deep_relu_he.json", False, {
        "val_accuracy": (final("val", "accuracy"), percent(1))}),
    "deep_sigmoid_batchnorm": Example("deep_sigmoid_batchnorm.json", False, {
        "val_accuracy": (final("val", "accuracy"), percent(1))}),
    "lottery_ticket": Example("lottery_ticket.json", True, {
        **{f"rewind_{i}": (frame(i, "test_rewind"), percent(1)) for i in range(7)},
        **{f"reinit_{i}": (frame(i, "test_reinit"), percent(1)) for i in range(1, 7)}},
        run=sampled("lottery", train=False)),
    # -- estimators, ridge and lasso, universal approximation, linear regions
    "trees_vs_mlp": Example("trees_vs_mlp.json", False, {
        f"{split}_{model}": (final(split, f"{model}_acc"), number(3))
        for split in ("test", "val", "train") for model in ("tree", "forest", "boosting", "mlp")
    } | {"test_ece": (final("test", "tree_ece.ece"), number(3))}, long=True),
    "ufa_staircase": Example("ufa_staircase.json", False, {
        f"out{i}": (output("out", i), lambda v: f"{v:g}".replace("-", "−")) for i in range(5)}),
    "ufa_tlu_bins_4": Example("ufa_tlu_bins_4.json", False, {
        "mse": (final("train", "loss"), number(4))}),
    "ufa_tlu_bins_16": Example("ufa_tlu_bins_16.json", False, {
        "mse": (final("train", "loss"), number(5))}),
    "ufa_tlu_bins_64": Example("ufa_tlu_bins_64.json", False, {
        "mse": (final("train", "loss"), number(6))}),
    "ridge_lasso": Example("ridge_lasso.json", False, {
        **{f"{model}_w{i + 1}": (weight(model, "weight", i), number(3))
           for model in ("ls", "ridge", "lasso") for i in range(4)},
        **{f"{model}_test_mse": (final("test", f"{model}_mse"), number(3))
           for model in ("ls", "ridge", "lasso")}}),
    "ridge_path": Example("ridge_path.json", False, {
        **{f"w_{i}": (frame(i, "weights", 0), number(3)) for i in range(1, 8)},
        "w1_0": (frame(0, "weights", 0), number(3)),
        "w2_0": (frame(0, "weights", 1), number(3)),
        "test_0": (frame(0, "test_loss"), number(2)),
        "test_3": (frame(3, "test_loss"), number(2)),
        "test_7": (frame(7, "test_loss"), number(0))}, run=sampled("path", train=False)),
    "cnn_digits_allconv_size": Example("cnn_digits_allconv.json", False, {
        "params": (params, count)}, run=compiled),
    "linear_regions": Example("linear_regions.json", False, {
        **{f"grid_{i}": (frame(i, "regions"), count) for i in range(3)},
        "with_vertices": (frame(2, "regions_with_vertices"), count)},
        run=sampled("regions")),
    "cnn_digits_allconv": Example("cnn_digits_allconv.json", True, {
        "test_accuracy": (final("test", "accuracy"), number(3)),
        "test_loss": (final("test", "loss"), number(3)),
        "epochs": (lambda run: len(run.history), count),
        "best_epoch": (lambda run: run.best_epoch, count)}),
    "dcgan_digits": Example("dcgan_digits.json", True, {
        "d_loss": (final("train", "d_loss"), number(2)),
        "g_loss": (final("train", "g_loss"), number(2))}),
    "ddpm_digits": Example("ddpm_digits.json", True, {
        "train_loss": (final("train", "loss"), number(3)),
        "val_loss": (final("val", "loss"), number(3))}),
    **{f"cnn_digits{suffix}": Example(f"cnn_digits{suffix}.json", True, {
        **{f"test_accuracy_{s}": (of(s, final("test", "accuracy")), number(3)) for s in range(3)},
        "test_accuracy_mean": (mean(final("test", "accuracy")), number(3)),
        "test_loss_mean": (mean(final("test", "loss")), number(3)),
        **({f"test_wrong_{s}": (of(s, wrong("test", "accuracy", 359)), count)
            for s in range(3)} if not suffix else {})}, run=seeds(0, 1, 2))
       for suffix in ("", "_sgd", "_adadelta")},
    "vit_digits": Example("vit_digits.json", True, {
        **{f"test_accuracy_{s}": (of(s, final("test", "accuracy")), number(3)) for s in range(3)},
        **{f"val_accuracy_{s}": (of(s, final("val", "accuracy")), number(3)) for s in range(3)}},
        run=seeds(0, 1, 2)),
    # -- your own files
    # the full-size sets of examples/make_data.py (the graphs name the shipped samples)
    **{name: Example(f"{name}.json", False, figures, run=with_data(trained()), long=True,
                     depends=("examples/make_data.py",), sets=FULL_DATA[name])
       for name, figures in {
           "cifar_cnn": {"test_accuracy": (final("test", "accuracy"), number(3)),
                         "val_accuracy": (final("val", "accuracy"), number(3))},
           "parquet_churn": {"test_accuracy": (final("test", "accuracy"), number(3)),
                             "val_accuracy": (final("val", "accuracy"), number(3)),
                             "train_accuracy": (final("train", "accuracy"), number(3))},
           "hf_signals": {"test_accuracy": (final("test", "accuracy"), number(3)),
                          "train_accuracy": (final("train", "accuracy"), number(3))},
           "webdataset_signals": {"val_accuracy": (final("val", "accuracy"), number(3)),
                                  "train_accuracy": (final("train", "accuracy"), number(3))},
           "bpe_transformer": {"train_loss": (final("train", "loss"), number(3)),
                               "val_loss": (final("val", "loss"), number(3))},
       }.items()},
    # -- object detection
    **_detection("yolo_shapes"), **_detection("rcnn_shapes"), **_detection("detr_shapes"),
}
