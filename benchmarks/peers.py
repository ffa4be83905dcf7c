"""How nodegraph compares with the tools people already train with: the same digits MLP and
CNN trained by nodegraph, a hand-written PyTorch loop, PyTorch Lightning's Trainer (lean
settings and its defaults) and Keras 3 `fit` on the torch backend.

Every contender gets the same work: the samples of nodegraph's `data.Digits` block (its
train and test splits, taken once from a compiled graph), the same order (one
`torch.randperm` per epoch from a generator seeded as nodegraph's trainer seeds its own),
batches of 32, Adam at lr 1e-3, the same epochs, the training accuracy counted every step
(nodegraph's Accuracy block, Keras's "accuracy" metric, `self.log` in Lightning), and at the
end the loss and accuracy of the train and test splits (what `nodegraph.train` reports),
all on one CPU thread. Lightning and Keras read batches from one DataLoader that indexes
whole batches (no per-sample collation), so the Trainer is measured, not the loader.
A contender's time is its whole call: building the model, training, the final evaluation
(for nodegraph: `nodegraph.train(graph)`, compiling included); imports are not counted.

Contenders alternate, each in every place of the order in turn, `--repeats` times, so drift
in the machine's load hits all alike; printed are medians and the ratios of medians to the
hand-written loop, by the wall clock and by the process's CPU time (one thread: what the
work cost, which other processes on a busy machine skew less). Each contender's median test
accuracy is printed and checked against the hand-written loop's (within `--tolerance`): a
benchmark that trains different things compares nothing, so the run fails (exit 1) when
one falls short.

Lightning and Keras are no dependencies of nodegraph: they live in a venv of the
benchmark's own, set up once from the repository root with

    python3.11 -m venv .peers-venv && .peers-venv/bin/pip install -c constraints.txt \\
        torch==2.13.0 lightning keras scikit-learn -e .

and the benchmark runs as

    OMP_NUM_THREADS=1 .peers-venv/bin/python benchmarks/peers.py --repeats 5

A contender that cannot be imported is reported as skipped and the others run.
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "torch")  # before keras is imported, if ever
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import logging  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402

import nodegraph  # noqa: E402
from nodegraph.model.graph import Graph  # noqa: E402

BATCH, LR, SEED, EVAL_BATCH = 32, 1e-3, 0, 1024
EPOCHS = {"mlp": 20, "cnn": 3}
FLOOR = {"mlp": 0.90, "cnn": 0.85}  # test accuracy every contender must reach at least


# -- the models --------------------------------------------------------------------------

def graph(model: str) -> Graph:
    """The nodegraph graph: examples/cnn_digits.json's CNN (no val split, no early stopping,
    so every contender trains the same epochs) or a two-hidden-layer MLP on the 8x8 pixels."""
    g = Graph(f"{model}-digits")
    image = model == "cnn"
    g.add("data.Digits", "data", size=28 if image else 8, layout="image" if image else "flat",
          val_fraction=0.0, test_fraction=0.2, batch_size=BATCH)
    chain: list[tuple[str, str, dict]] = (
        [("layers.Conv2d", "conv1", {"out_channels": 32, "kernel_size": [3]}),
         ("activations.ReLU", "relu1", {}),
         ("layers.MaxPool2d", "pool1", {"kernel_size": [2]}),
         ("layers.Conv2d", "conv2", {"out_channels": 64, "kernel_size": [3]}),
         ("activations.ReLU", "relu2", {}),
         ("layers.MaxPool2d", "pool2", {"kernel_size": [2]}),
         ("layers.Flatten", "flat", {}),
         ("layers.Dropout", "dropout", {"p": 0.5})] if image else
        [("layers.Linear", "h1", {"out_features": 128}), ("activations.ReLU", "relu1", {}),
         ("layers.Linear", "h2", {"out_features": 64}), ("activations.ReLU", "relu2", {})])
    chain.append(("layers.Linear", "out", {"out_features": 10}))
    previous = ("data", "x")
    for block, node, params in chain:
        g.add(block, node, **params)
        g.connect(previous, (node, "input"))
        previous = (node, "output")
    g.add("losses.CrossEntropy", "loss")
    g.add("optimizers.Adam", "opt", lr=LR)
    g.add("metrics.Accuracy", "accuracy")
    for source, target in [(("out", "output"), ("loss", "input")),
                           (("data", "y"), ("loss", "target")),
                           (("loss", "loss"), ("opt", "loss")),
                           (("out", "output"), ("accuracy", "input")),
                           (("data", "y"), ("accuracy", "target"))]:
        g.connect(source, target)
    g.update_training(epochs=EPOCHS[model], seed=SEED, device="cpu", threads=1)
    return g


def torch_model(model: str) -> nn.Module:
    if model == "cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Dropout(0.5), nn.Linear(64 * 5 * 5, 10))
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                         nn.Linear(64, 10))


# -- the data, the order -----------------------------------------------------------------

def splits(model: str) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The train and test (x, y) of nodegraph's data block: every contender's samples."""
    data = nodegraph.compile(graph(model), for_training=False).datasets["data"]
    return {s: (data.tensors(s)["x"].float(), data.tensors(s)["y"].long())
            for s in ("train", "test")}


class Orders(torch.utils.data.Sampler):
    """Batches of indices, one fresh permutation per epoch from a seeded generator: the
    order nodegraph's trainer draws (`Dataset.batches` with its shuffle generator)."""

    def __init__(self, n: int):
        self.n, self.generator = n, torch.Generator().manual_seed(SEED)

    def __iter__(self):
        order = torch.randperm(self.n, generator=self.generator)
        for i in range(0, self.n, BATCH):
            yield order[i:i + BATCH]

    def __len__(self) -> int:
        return -(-self.n // BATCH)


class Batches(torch.utils.data.Dataset):
    """Indexed by a whole batch of indices at once: no per-sample collation."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor):
        self.x, self.y = x, y

    def __getitem__(self, idx):
        return self.x[idx], self.y[idx]

    def __len__(self) -> int:
        return len(self.x)


def loader(x, y, shuffle: bool = True) -> torch.utils.data.DataLoader:
    if shuffle:
        return torch.utils.data.DataLoader(Batches(x, y), sampler=Orders(len(x)),
                                           batch_size=None)
    plain = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(len(x))),
                                          EVAL_BATCH, drop_last=False)
    return torch.utils.data.DataLoader(Batches(x, y), sampler=plain, batch_size=None)


# -- the contenders: each returns the test accuracy ---------------------------------------

def run_nodegraph(model: str, data) -> float:
    result = nodegraph.train(graph(model))
    return float(result.final["test"]["accuracy"])


def run_hand(model: str, data) -> float:
    torch.manual_seed(SEED)
    net = torch_model(model)
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    loss_fn = nn.CrossEntropyLoss()
    x, y = data["train"]
    generator = torch.Generator().manual_seed(SEED)
    for _ in range(EPOCHS[model]):
        net.train()
        order = torch.randperm(len(x), generator=generator)
        total = correct = 0.0
        for i in range(0, len(x), BATCH):
            idx = order[i:i + BATCH]
            xb, yb = x[idx], y[idx]
            logits = net(xb)
            loss = loss_fn(logits, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach() * len(idx)
            correct += (logits.detach().argmax(1) == yb).sum()
        _ = (float(total) / len(x), float(correct) / len(x))  # the epoch's numbers
    finals = {s: _evaluate(net, *data[s], loss_fn) for s in ("train", "test")}
    return finals["test"][1]


def _evaluate(net: nn.Module, x, y, loss_fn) -> tuple[float, float]:
    net.eval()
    loss = correct = 0.0
    with torch.no_grad():
        for i in range(0, len(x), EVAL_BATCH):
            logits = net(x[i:i + EVAL_BATCH])
            loss += float(loss_fn(logits, y[i:i + EVAL_BATCH])) * len(logits)
            correct += float((logits.argmax(1) == y[i:i + EVAL_BATCH]).sum())
    return loss / len(x), correct / len(x)


def lightning_contender(lean: bool) -> Callable:
    import lightning as L  # noqa: N812 (Lightning's own spelling)

    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

    class Classifier(L.LightningModule):
        def __init__(self, net: nn.Module):
            super().__init__()
            self.net, self.loss_fn = net, nn.CrossEntropyLoss()

        def training_step(self, batch, _):
            xb, yb = batch
            logits = self.net(xb)
            loss = self.loss_fn(logits, yb)
            self.log("train_loss", loss, on_step=False, on_epoch=True)
            self.log("train_acc", (logits.argmax(1) == yb).float().mean(), on_step=False,
                     on_epoch=True)
            return loss

        def test_step(self, batch, _, dataloader_idx=0):
            xb, yb = batch
            logits = self.net(xb)
            self.log("loss", self.loss_fn(logits, yb))
            self.log("acc", (logits.argmax(1) == yb).float().mean())

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=LR)

    def run(model: str, data) -> float:
        torch.manual_seed(SEED)
        module = Classifier(torch_model(model))
        settings = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False) if lean else {}
        with tempfile.TemporaryDirectory() as root, contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer = L.Trainer(max_epochs=EPOCHS[model], accelerator="cpu", devices=1,
                                default_root_dir=root, **settings)
            trainer.fit(module, loader(*data["train"]))
            results = trainer.test(module, [loader(*data[s], shuffle=False)
                                            for s in ("train", "test")], verbose=False)
        return float(results[1]["acc/dataloader_idx_1"])
    return run


def keras_contender() -> Callable:
    import keras

    keras.config.set_image_data_format("channels_first")  # the tensors are N, C, H, W

    def build(model: str):
        layers = keras.layers
        if model == "cnn":
            body = [keras.Input((1, 28, 28)), layers.Conv2D(32, 3, activation="relu"),
                    layers.MaxPooling2D(2), layers.Conv2D(64, 3, activation="relu"),
                    layers.MaxPooling2D(2), layers.Flatten(), layers.Dropout(0.5)]
        else:
            body = [keras.Input((64,)), layers.Dense(128, activation="relu"),
                    layers.Dense(64, activation="relu")]
        net = keras.Sequential([*body, layers.Dense(10)])
        net.compile(optimizer=keras.optimizers.Adam(LR),
                    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                    metrics=["accuracy"])
        return net

    def run(model: str, data) -> float:
        keras.utils.set_random_seed(SEED)
        net = build(model)
        net.fit(loader(*data["train"]), epochs=EPOCHS[model], verbose=0, shuffle=False)
        finals = {s: net.evaluate(*[t.numpy() for t in data[s]], batch_size=EVAL_BATCH,
                                  verbose=0, return_dict=True) for s in ("train", "test")}
        return float(finals["test"]["accuracy"])
    return run


def contenders() -> tuple[dict[str, Callable], list[str]]:
    """The contenders that can run here, and why the others cannot."""
    found: dict[str, Callable] = {"nodegraph": run_nodegraph, "hand loop": run_hand}
    skipped = []
    for name, make in (("Lightning lean", lambda: lightning_contender(True)),
                       ("Lightning defaults", lambda: lightning_contender(False)),
                       ("Keras fit", keras_contender)):
        try:
            found[name] = make()
        except ImportError as e:
            skipped.append(f"{name}: skipped, cannot import it ({e}); set up the benchmark's "
                           "venv as this file's docstring says")
    return found, skipped


# -- the measurement -----------------------------------------------------------------------

def measure(model: str, runs: dict[str, Callable], repeats: int) -> dict[str, list]:
    data = splits(model)
    names = list(runs)
    times: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    accuracy: dict[str, list[float]] = {n: [] for n in names}
    for name in names:  # one untimed run each: lazy imports and first-call costs
        runs[name](model, data)
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            began, began_cpu = time.perf_counter(), time.process_time()
            acc = runs[name](model, data)
            times[name].append(time.perf_counter() - began)
            cpu[name].append(time.process_time() - began_cpu)
            accuracy[name].append(acc)
    return {"times": times, "cpu": cpu, "accuracy": accuracy}


def report(model: str, found: dict, tolerance: float) -> bool:
    times, cpu, accuracy = found["times"], found["cpu"], found["accuracy"]
    base = statistics.median(times["hand loop"])
    base_cpu = statistics.median(cpu["hand loop"])
    base_acc = statistics.median(accuracy["hand loop"])
    print(f"\n{model.upper()} ({EPOCHS[model]} epochs, batch {BATCH}, Adam {LR}, 1 thread)")
    print(f"  {'contender':<20} {'wall s':>8} {'min s':>7} {'ratio':>6} {'CPU s':>7} "
          f"{'ratio':>6} {'test acc':>9}")
    ok = True
    for name in times:
        med, acc = statistics.median(times[name]), statistics.median(accuracy[name])
        med_cpu = statistics.median(cpu[name])
        fine = acc >= FLOOR[model] and acc >= base_acc - tolerance
        ok &= fine
        print(f"  {name:<20} {med:8.3f} {min(times[name]):7.3f} {med / base:5.2f}x "
              f"{med_cpu:7.3f} {med_cpu / base_cpu:5.2f}x "
              f"{acc:9.3f}{'' if fine else '  <- not comparable'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", nargs="+", choices=("mlp", "cnn"), default=["mlp", "cnn"])
    parser.add_argument("--tolerance", type=float, default=0.05,
                        help="how far below the hand loop's test accuracy a contender may be")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    runs, skipped = contenders()
    for line in skipped:
        print(line)
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, load {load:.1f} at the start")
    ok = True
    for model in args.models:
        ok &= report(model, measure(model, runs, args.repeats), args.tolerance)
    print(f"\nload {os.getloadavg()[0]:.1f} at the end")
    if not ok:
        print("some contender did not reach a comparable accuracy: the times compare "
              "different work", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
