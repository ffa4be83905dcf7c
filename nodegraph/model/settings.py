"""The `training` section of a graph file: declared once, checked like block params.

These are the settings of a run that belong to no single block: how many epochs, the seed,
the device, early stopping, how often to checkpoint. They are declared as `Param`s so the
validator checks them with the same messages as block params, the CLI's `--set
training.epochs=5` and the editor's toolbar use the same names, and unknown keys are
reported instead of ignored.

A file's numbers are bounded where a run would take them literally: `epochs` (and the
epochs of all stages together) at `MAX_EPOCHS`, as many as the editor's box offers, since a
run lists its epochs before it starts; `workers` at `MAX_WORKERS` (validation also holds it
to the machine's cores and the dataset's batches, `nodegraph.check.bounds`). `stages` is
checked entry by entry, each field with its type, so a stage named by an object is a
problem naming ``training.stages``, never an error inside the code that reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodegraph.model.errors import ParamError, Problem
from nodegraph.model.spec import (
    Param,
    Params,
    bool_param,
    choice_param,
    float_param,
    int_param,
    str_param,
)

MAX_EPOCHS = 1_000_000  # the editor's epochs box goes as far; a run lists every epoch
MAX_WORKERS = 256  # beyond any machine's cores; validation bounds it by this one's
MAX_STAGES = 1_000
STAGE_KEYS = ("name", "epochs", "optimizers", "frozen")

TRAINING_PARAMS: tuple[Param, ...] = (
    int_param("epochs", 10, "passes over the training split", min=0, max=MAX_EPOCHS),
    int_param("seed", 0, "seed of weight initialisation, shuffling and dropout", min=0,
              max=2**31 - 1),  # what every seed taker holds (numpy, torch + rank, a Qt spin box)
    str_param("device", "auto", "cpu, cuda, cuda:N or auto (a GPU when there is one)"),
    int_param("patience", None, "early stopping: stop after this many epochs without "
              "improvement of `monitor`; empty means never stop early", min=1, nullable=True),
    str_param("monitor", "", "the number early stopping and `best` watch, as split.key "
              "(val.loss, val.accuracy); empty means val.loss, or train.loss without val"),
    choice_param("mode", ("auto", "min", "max"), "auto",
                 "whether the monitored number should fall or rise; auto: accuracy-like "
                 "keys rise, the rest fall"),
    float_param("min_delta", 0.0, "the least change that counts as an improvement", min=0),
    bool_param("restore_best", True, "after training, return to the weights of the best epoch "
               "(when early stopping or a monitor is set)"),
    int_param("checkpoint_every", 1, "epochs between checkpoints (with a checkpoint dir)",
              min=1),
    int_param("loss_every", 10, "steps between loss values in step events (reading the loss "
              "waits for the device)", min=1),
    int_param("probe_every", 10, "probe activations and gradients at most every N steps "
              "(only while someone watches: the editor, --probe-out)", min=1),
    float_param("probe_budget", 0.05, "the share of training time probing may cost (1: as "
                "long as training itself); the interval grows to keep within it",
                min=0.001, max=1000),
    float_param("probe_rate", 5.0, "probe frames per second at most (the editor plays about "
                "one wave a second); 0: no limit, every `probe_every` steps within the budget",
                min=0, max=10000),
    int_param("histograms_per_epoch", 4, "TensorBoard histograms of the weights and their "
              "gradients per epoch (with a log dir); 0: none", min=0, max=10000),
    Param("stages", "json", [], "training in phases, in order: a list of {\"name\", "
          "\"epochs\", \"optimizers\": [ids] (default all), \"frozen\": [node ids]}; "
          "empty: one phase of `epochs` with every optimizer"),
    choice_param("compile", ("off", "inductor", "aot_eager", "eager"), "off",
                 "run the training forward through torch.compile with this backend; falls back "
                 "to eager when compilation fails"),
    choice_param("dtype", ("float32", "float64", "bfloat16"), "float32",
                 "element type of the whole graph's data and weights; a data block or layer "
                 "may override it with its own dtype param"),
    int_param("eval_batch_size", 1024, "batch size for evaluation passes", min=1),
    str_param("log_dir", "", "write TensorBoard event files here (scalars, learning rates, "
              "hyperparameters, probe histograms; needs the tracking extra); empty: none"),
    int_param("workers", None, "DataLoader worker processes reading a streamed dataset; empty: "
              "one per spare core (up to 8) for splits of 256 samples or more; at most 4 per core "
              "and one per batch", min=0, max=MAX_WORKERS, nullable=True),
    bool_param("pin_memory", None, "pin streamed batches in page-locked memory for faster "
               "copies to the GPU; empty: on when training on a GPU", nullable=True),
    bool_param("persistent_workers", None, "keep a streamed dataset's workers alive from "
               "epoch to epoch; empty: yes", nullable=True),
    int_param("prefetch_factor", None, "batches each worker reads ahead; empty: PyTorch's "
              "default (2)", min=1, nullable=True),
    choice_param("precision", ("32", "bf16-mixed", "16-mixed"), "32",
                 "arithmetic of the forward pass: 32 (float32), or mixed precision under "
                 "autocast with bfloat16 or float16 (16-mixed scales the loss with a "
                 "GradScaler); the weights stay float32"),
    int_param("accumulate", 1, "gradient accumulation: batches whose gradients add up before "
              "each optimizer step (the effective batch is batch_size x accumulate)", min=1),
    int_param("threads", None, "CPU threads for the run's arithmetic; empty: OMP_NUM_THREADS "
              "when set, else chosen from the model's work per step and the idle cores",
              min=1, nullable=True),
)



class TrainingSettings(Params):
    """The resolved settings, typed (one annotation per `TRAINING_PARAMS` entry; a test
    holds the two to each other)."""

    epochs: int
    seed: int
    device: str
    patience: int | None
    monitor: str
    mode: str
    min_delta: float
    restore_best: bool
    checkpoint_every: int
    loss_every: int
    probe_every: int
    probe_budget: float
    probe_rate: float
    histograms_per_epoch: int
    stages: Any
    compile: str
    dtype: str
    eval_batch_size: int
    log_dir: str
    workers: int | None
    pin_memory: bool | None
    persistent_workers: bool | None
    prefetch_factor: int | None
    precision: str
    accumulate: int
    threads: int | None


_BY_NAME = {p.name: p for p in TRAINING_PARAMS}
RISING = ("accuracy", "acc", "r2", "f1", "precision", "recall", "auc", "likelihood")


def resolve(training: Mapping[str, Any]) -> tuple[TrainingSettings, list[Problem]]:
    """Training settings with defaults filled in, and problems keyed as training.<name>."""
    values, problems = TrainingSettings(), []
    for param in TRAINING_PARAMS:
        values[param.name] = param.default
    for name, value in training.items():
        found = _BY_NAME.get(name)
        if found is None:
            known = ", ".join(_BY_NAME)
            problems.append(Problem(None, f"training.{name}", "unknown_param",
                                    f"unknown training setting '{name}' (known: {known})"))
            continue
        try:
            checked = found.check(value)
            values[name] = checked_stages(checked) if name == "stages" else checked
        except Exception as e:
            problems.append(Problem(None, f"training.{name}", "bad_param", str(e)))
    return values, problems


def checked_stages(stages: Any) -> list[dict[str, Any]]:
    """`stages` when it is a list of stage objects whose every field has its type (the
    nodes they name are checked against the graph by validation), else ParamError saying
    which stage and field."""
    if not isinstance(stages, list):
        raise ParamError(f"'stages' must be a list of objects, got {_short(stages)}")
    if len(stages) > MAX_STAGES:
        raise ParamError(f"'stages' lists {len(stages):,} stages; at most {MAX_STAGES:,}")
    total = 0
    for i, stage in enumerate(stages):
        where = f"stage {i + 1}"
        if not isinstance(stage, dict):
            raise ParamError(f"{where} must be an object with {', '.join(STAGE_KEYS)}, "
                             f"got {_short(stage)}")
        unknown = sorted(set(stage) - set(STAGE_KEYS))
        if unknown:
            raise ParamError(f"{where}: unknown keys {_short(unknown)} (known: "
                             f"{', '.join(STAGE_KEYS)})")
        name = stage.get("name")
        if name is not None and not isinstance(name, str):
            raise ParamError(f"{where}: 'name' must be text, got {_short(name)}")
        epochs = stage.get("epochs")
        if isinstance(epochs, bool) or not isinstance(epochs, int) or not (
                0 <= epochs <= MAX_EPOCHS):
            raise ParamError(f"{where}: 'epochs' must be a whole number from 0 to "
                             f"{MAX_EPOCHS:,}, got {_short(epochs)}")
        total += epochs
        for key in ("optimizers", "frozen"):
            ids = stage.get(key)
            if ids is not None and (not isinstance(ids, list) or not all(
                    isinstance(n, str) for n in ids)):
                raise ParamError(f"{where}: '{key}' must be a list of node ids, got "
                                 f"{_short(ids)}")
    if total > MAX_EPOCHS:
        raise ParamError(f"the stages add up to {total:,} epochs; at most {MAX_EPOCHS:,}")
    return stages


def _short(value: Any) -> str:
    """A value from a file, quoted for a message and cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def monitor_rises(key: str, mode: str) -> bool:
    """True when larger values of the monitored number are better."""
    if mode != "auto":
        return mode == "max"
    name = key.split(".", 1)[-1].lower()
    return any(word in name for word in RISING)
