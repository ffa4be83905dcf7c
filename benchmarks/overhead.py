"""How much does the graph cost over hand-written PyTorch? Both in one process, alternating.

(a) one training step of an MLP 784-256-256-10 (batch 128, synthetic data, Adam) as a
    compiled graph — the trainer's own step code — against the same model written as an
    `nn.Sequential` with the usual zero_grad / backward / step;
(a') the same for the digits CNN of `examples/cnn_digits.json` (batch 32, Adam) against
    the model written by hand with the compiled graph's weights;
(b) a whole `nodegraph.train` run of a digits MLP 64-32-10 (batch 32, 20 epochs, validation
    every epoch, final evaluation) against the equivalent hand-written loop, where the
    trainer's per-step work (batching, metrics, events) shows.

Runs alternate graph/hand so drift and noise hit both alike; the ratio is of the medians.
(a) alternates every few steps, many times over, so a burst of load on a shared machine
lands on both sides; (b) alternates whole runs.
Prints `step_ratio: X (MLP), cnn step_ratio: Z (CNN)` and `train_ratio: Y` last.
Targets: X <= 1.02, Z <= 1.02, Y <= 1.10. `--device cuda` runs both sides on the GPU (each
timed call ends with `torch.cuda.synchronize()`, so queued kernels are counted).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn

import nodegraph
from nodegraph.kinds.dataset import split_indices
from nodegraph.model.events import Emitter
from nodegraph.model.settings import resolve
from nodegraph.runtime.train import RunControl, Trainer


def mlp_graph(data_type: str, data_params: dict, widths: list[int], lr: float) -> nodegraph.Graph:
    g = nodegraph.Graph("bench")
    g.add(data_type, id="data", **data_params)
    prev = ("data", "x")
    for i, width in enumerate(widths):
        g.add("layers.Linear", id=f"fc{i}", out_features=width)
        g.connect(prev, (f"fc{i}", "input"))
        prev = (f"fc{i}", "output")
        if i < len(widths) - 1:
            g.add("activations.ReLU", id=f"relu{i}")
            g.connect(prev, (f"relu{i}", "input"))
            prev = (f"relu{i}", "output")
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.Adam", id="opt", lr=lr)
    g.add("metrics.Accuracy", id="accuracy")
    g.connect(prev, ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.connect(prev, ("accuracy", "input"))
    g.connect(("data", "y"), ("accuracy", "target"))
    return g


def hand_mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


# -- (a) one step --------------------------------------------------------------------------

def bench_step(rounds: int, steps: int) -> float:
    rng = np.random.default_rng(0)
    n = 128 * 8
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthetic.npz"
        np.savez(path, x=rng.normal(size=(n, 784)).astype(np.float32),
                 y=rng.integers(0, 10, size=n))
        g = mlp_graph("data.NumPy", {"path": str(path), "batch_size": 128, "val_fraction": 0.0,
                                     "target_kind": "class"},
                      [256, 256, 10], 1e-3)
        trainer, batch = trainer_and_batch(g)  # the data is read while the file exists
    run = trainer.c.optimizers[0]

    torch.manual_seed(0)
    model = hand_mlp([784, 256, 256, 10]).to(DEVICE)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return compare("step", *step_pair(trainer, run, batch, model, opt, steps), rounds,
                   per=steps)


def trainer_and_batch(g: nodegraph.Graph) -> tuple[Trainer, dict]:
    """The trainer's own step machinery for `g` on DEVICE, and its first training batch."""
    g.set_training("device", DEVICE)
    compiled = nodegraph.compile(g)
    opts, _ = resolve(g.training)
    trainer = Trainer(compiled, opts, Emitter(), RunControl(), None)
    return trainer, next(trainer.batches("train", shuffle=False))


def step_pair(trainer, run, batch, model, opt, steps: int):
    """`steps` training steps on one batch: the trainer's, and the hand-written loop's."""
    x, y = batch[("data", "x")], batch[("data", "y")]

    def graph_steps():
        for _ in range(steps):
            trainer.step(run, dict(batch))

    def hand_steps():
        for _ in range(steps):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    return graph_steps, hand_steps


# -- (a') one step of the digits CNN --------------------------------------------------------

CNN_FILE = Path(__file__).resolve().parent.parent / "examples" / "cnn_digits.json"


def hand_cnn() -> nn.Sequential:
    """examples/cnn_digits.json written by hand."""
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Dropout(0.5), nn.Linear(1600, 10))


def bench_cnn_step(rounds: int, steps: int) -> float:
    """The compiled example against `hand_cnn` given the same weights, on the same batch."""
    g = nodegraph.load(CNN_FILE)
    trainer, batch = trainer_and_batch(g)
    compiled, run = trainer.c, trainer.c.optimizers[0]
    compiled.module.train()

    model = hand_cnn().to(DEVICE)
    blocks = compiled.module.blocks
    for mine, theirs in zip([model[0], model[3], model[8]],
                            [blocks["conv1"], blocks["conv2"], blocks["out"]], strict=True):
        mine.load_state_dict(theirs.state_dict())
    lr = g.node("opt").params.get("lr", 1e-3)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    return compare("cnn step", *step_pair(trainer, run, batch, model, opt, steps), rounds,
                   per=steps)


# -- (b) a whole run ---------------------------------------------------------------------

EPOCHS, BATCH = 20, 32


def graph_run() -> None:
    g = mlp_graph("data.Digits", {"batch_size": BATCH, "val_fraction": 0.2, "split": "random"},
                  [32, 10], 1e-2)
    g.update_training({"epochs": EPOCHS, "seed": 0, "device": DEVICE})
    nodegraph.train(g)


def hand_run() -> None:
    digits = load_digits()
    x = torch.as_tensor(digits.data, dtype=torch.float32, device=DEVICE)
    y = torch.as_tensor(digits.target, dtype=torch.long, device=DEVICE)
    idx = split_indices(len(x), 0.2, 0.0, "random", 0)
    xt, yt = x[idx["train"]], y[idx["train"]]
    xv, yv = x[idx["val"]], y[idx["val"]]
    torch.manual_seed(0)
    model = hand_mlp([64, 32, 10]).to(DEVICE)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(0)

    def evaluate(xs, ys):
        model.eval()
        with torch.no_grad():
            out = model(xs)
            stats = (F.cross_entropy(out, ys).item(), (out.argmax(1) == ys).float().mean().item())
        model.train()
        return stats

    history = []
    for _ in range(EPOCHS):
        model.train()
        total, correct, n = 0.0, 0, 0
        order = torch.randperm(len(xt), generator=gen).to(DEVICE)
        for i in range(0, len(xt), BATCH):
            b = order[i:i + BATCH]
            xb, yb = xt[b], yt[b]
            out = model(xb)
            loss = F.cross_entropy(out, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * len(b)
            with torch.no_grad():
                correct = correct + (out.argmax(1) == yb).sum()
            n += len(b)
        history.append((total / n, float(correct) / n, *evaluate(xv, yv)))
    evaluate(xt, yt), evaluate(xv, yv)


CLOCK = time.perf_counter
DEVICE = "cpu"


def timed(fn) -> float:
    """Seconds `fn` takes, queued GPU work included."""
    start = CLOCK()
    fn()
    if DEVICE != "cpu":
        torch.cuda.synchronize()
    return CLOCK() - start


def compare(name: str, graph_fn, hand_fn, rounds: int, per: int = 1) -> float:
    graph_fn(), hand_fn()  # warm-up: allocator, kernels, first-use imports
    graph_t, hand_t = [], []
    for r in range(rounds):
        for fn, times in ((graph_fn, graph_t), (hand_fn, hand_t)) if r % 2 == 0 else \
                ((hand_fn, hand_t), (graph_fn, graph_t)):
            times.append(timed(fn) / per)
    g, h = statistics.median(graph_t), statistics.median(hand_t)
    unit, scale = ("ms", 1e3) if h > 1e-3 else ("us", 1e6)
    print(f"{name}: graph {g * scale:.1f} {unit}, hand-written {h * scale:.1f} {unit} "
          f"(medians of {rounds} alternating rounds)")
    return g / h


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=300, help="alternations in (a)")
    parser.add_argument("--steps", type=int, default=4, help="steps per round in (a)")
    parser.add_argument("--runs", type=int, default=9, help="alternating whole runs in (b)")
    parser.add_argument("--cnn-scale", type=int, default=3,
                        help="the CNN step case alternates rounds / this many times")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: this thread's CPU time, immune to other processes on a busy "
                        "machine (implies --threads 1, so all the work is on this thread)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N] (both sides)")
    args = parser.parse_args()
    global CLOCK, DEVICE
    DEVICE = args.device
    if args.clock == "cpu":
        args.threads, CLOCK = 1, time.thread_time
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.clock} clock, "
          f"device {DEVICE}")
    step_ratio = bench_step(args.rounds, args.steps)
    cnn_ratio = bench_cnn_step(max(1, args.rounds // args.cnn_scale), args.steps)
    train_ratio = compare("train", graph_run, hand_run, args.runs)
    print(f"step_ratio: {step_ratio:.3f} (MLP), cnn step_ratio: {cnn_ratio:.3f} (CNN)")
    print(f"train_ratio: {train_ratio:.3f}")


if __name__ == "__main__":
    main()
