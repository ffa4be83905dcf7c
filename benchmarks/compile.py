"""Does `nodegraph run --compile` pay off on a transformer? Three ways to train one model.

The model is a causal character language model of Transformer size: token embedding
(d_model 256) plus sinusoidal positions, 4 pre-LN encoder layers (4 heads, feed-forward
1024, dropout 0.1) and a linear head over the vocabulary, trained with AdamW on windows of
64 characters of the bundled text, 16 windows a step. It runs

- as a nodegraph graph of attention blocks, eager (the trainer's own step code);
- as the same graph with the trainer's torch.compile (what `run --compile` does);
- hand-written: `nn.Embedding`, `nn.TransformerEncoderLayer` and `nn.Linear` in eager
  PyTorch, with the usual zero_grad / backward / step. Before timing it is given the
  graph's weights and must compute the graph's loss: it is the same model.

All three in one process, the order rotating every round, so drift and noise hit them
alike; the ratios are of the medians. torch.compile's first calls (tracing and code
generation) are warm-up, timed apart. Where torch.compile is unavailable or fails, the
compiled variant runs eager as `run --compile` does, and the output says so.
Prints `eager_ratio: X` (graph eager / hand-written eager) and `compile_vs_eager_ratio: Y`
(graph + torch.compile / hand-written eager) last. `--dropout 0` and `--fallback-random`
show how much of the compiled run's time goes to drawing dropout masks.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

import nodegraph
from nodegraph.model.events import Emitter, Message
from nodegraph.model.settings import resolve
from nodegraph.runtime.train import RunControl, Trainer
from nodes.data.sequences import BUNDLED_TEXT, vocabulary

VOCAB = len(vocabulary(BUNDLED_TEXT))
LR = 3e-4


# -- the model as a graph ----------------------------------------------------------------

def lm_graph(a: argparse.Namespace) -> nodegraph.Graph:
    g = nodegraph.Graph("compile-bench")
    g.add("data.TokenText", id="data", seq_len=a.seq_len, stride=8, batch_size=a.batch)
    g.add("layers.Embedding", id="embed", num_embeddings=VOCAB, embedding_dim=a.d_model)
    g.add("attention.SinusoidalPositionalEncoding", id="pos")
    blocks = [g.add("attention.TransformerEncoderBlock", id=f"block{i}", nhead=a.heads,
                    dim_feedforward=4 * a.d_model, dropout=a.dropout, causal=True,
                    norm_first=True) for i in range(1, a.layers + 1)]
    g.add("attention.LMHead", id="head", vocab_size=VOCAB)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.AdamW", id="opt", lr=LR)
    g.connect(("data", "x"), ("embed", "input"))
    chain = ["embed", "pos", *blocks, "head"]
    for src, dst in zip(chain, chain[1:], strict=False):
        g.connect((src, "output"), (dst, "input"))
    g.connect(("head", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.update_training({"seed": 0, "device": a.device})
    return g


class GraphRun:
    """One compiled graph and a trainer over it; `backend` names torch.compile's backend."""

    def __init__(self, a: argparse.Namespace, backend: str = "off"):
        graph = lm_graph(a)
        graph.set_training("compile", backend)
        self.compiled = nodegraph.compile(graph)
        opts, _ = resolve(graph.training)
        self.fallbacks: list[str] = []  # torch.compile's messages when it gave up
        events = Emitter()
        events.subscribe(lambda m: self.fallbacks.append(m.text)
                         if "torch.compile" in m.text else None, Message)
        self.trainer = Trainer(self.compiled, opts, events, RunControl(), None)
        self.compiled.module.train()

    def batches(self, count: int) -> list[dict]:
        """The first `count` full batches of the training split."""
        full = self.compiled.datasets["data"].step_batch("train")
        out = [b for b in self.trainer.batches("train", shuffle=False)
               if b[("data", "x")].shape[0] == full]
        return out[:count]

    def steps(self, batches: list[dict]) -> None:
        run = self.compiled.optimizers[0]
        for batch in batches:
            self.trainer.step(run, dict(batch))


# -- the same model, hand-written --------------------------------------------------------

def sinusoidal_table(length: int, dim: int, base: float = 10000.0) -> torch.Tensor:
    """p[t, 2i] = sin(t / base^(2i/dim)), p[t, 2i+1] = cos(t / base^(2i/dim))."""
    t = torch.arange(length, dtype=torch.float32)[:, None]
    angle = t / base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(length, dim)


class HandLM(nn.Module):
    def __init__(self, vocab: int, d_model: int, heads: int, layers: int, dropout: float,
                 seq_len: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.register_buffer("positions", sinusoidal_table(seq_len, d_model), persistent=False)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout, batch_first=True,
                                       norm_first=True) for _ in range(layers))
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq_len),
                             persistent=False)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) + self.positions[:x.shape[1]]
        for layer in self.layers:
            h = layer(h, src_mask=self.mask, is_causal=True)
        return self.head(h)


def hand_model(a: argparse.Namespace, graph: GraphRun) -> HandLM:
    """The hand-written model with the graph's weights (block i is layers.{i-1})."""
    model = HandLM(VOCAB, a.d_model, a.heads, a.layers, a.dropout, a.seq_len)
    state = {}
    for key, value in graph.compiled.module.block_state().items():
        node, _, rest = key.partition(".")
        name = f"layers.{int(node[5:]) - 1}" if node.startswith("block") else node
        state[f"{name}.{rest}"] = value.detach().clone()
    model.load_state_dict(state)
    return model.to(graph.compiled.device)


def hand_loss(model: HandLM, batch: dict) -> torch.Tensor:
    x, y = batch[("data", "x")], batch[("data", "y")]
    return F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))


def check_same_model(graph: GraphRun, model: HandLM, batch: dict) -> float:
    """The graph's loss and the hand-written model's on one batch, without dropout."""
    module = graph.compiled.module
    module.eval(), model.eval()
    with torch.no_grad():
        theirs = module.run(graph.compiled.eval_plan, dict(batch))[("loss", "loss")]
        mine = hand_loss(model, batch)
    module.train(), model.train()
    if not torch.allclose(mine, theirs, rtol=1e-4, atol=1e-5):
        raise SystemExit(f"the hand-written model is not the graph's: loss {mine.item():.6f} "
                         f"against {theirs.item():.6f}")
    return theirs.item()


def hand_steps(model: HandLM, optimizer: torch.optim.Optimizer) -> Callable[[list], None]:
    def steps(batches: list[dict]) -> None:
        for batch in batches:
            loss = hand_loss(model, batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return steps


# -- timing -------------------------------------------------------------------------------

CLOCK = time.perf_counter


def timed(fn: Callable[[], None], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = CLOCK()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return CLOCK() - start


def race(variants: dict[str, Callable[[], None]], rounds: int, device: torch.device
         ) -> dict[str, float]:
    """Median seconds per call of each variant over `rounds` rounds, the order rotating."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(timed(variants[name], device))
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=5, help="training steps per round")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--backend", default="inductor", help="torch.compile's backend")
    parser.add_argument("--fallback-random", action="store_true",
                        help="inductor draws random numbers (dropout) with ATen's generator "
                        "instead of its own kernels (torch._inductor.config.fallback_random)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: this process's CPU time, less disturbed by other processes "
                        "on a busy machine (CPU runs only)")
    a = parser.parse_args()
    global CLOCK
    if a.clock == "cpu":
        CLOCK = time.process_time
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.fallback_random:
        importlib.import_module("torch._inductor.config").fallback_random = True
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    print(f"torch {torch.__version__}, device {a.device}, {torch.get_num_threads()} threads, "
          f"{a.clock} clock, load average {load:.2f} on {os.cpu_count()} CPUs"
          + (", inductor's fallback_random" if a.fallback_random else ""))

    eager, fast = GraphRun(a), GraphRun(a, a.backend)
    device = eager.compiled.device
    batches = eager.batches(a.steps)
    params = sum(p.numel() for p in eager.compiled.module.parameters())
    print(f"model: {a.layers} layers, d_model {a.d_model}, {a.heads} heads, vocabulary "
          f"{VOCAB}, {params:,} parameters; {len(batches)} steps of {a.batch} x {a.seq_len} "
          "tokens per round")
    model = hand_model(a, eager)
    loss = check_same_model(eager, model, batches[0])
    print(f"same model: graph and hand-written loss {loss:.5f} on the first batch")
    hand = hand_steps(model, torch.optim.AdamW(model.parameters(), lr=LR))

    variants = {"graph eager": lambda: eager.steps(batches),
                "graph + torch.compile": lambda: fast.steps(batches),
                "hand-written eager": lambda: hand(batches)}
    for name, fn in variants.items():  # warm-up: allocator, kernels, compilation
        print(f"warm-up {name}: {timed(fn, device):.1f} s")
    if fast.fallbacks:
        print("torch.compile is not in use here, the compiled variant ran eager: "
              + "; ".join(fast.fallbacks))
    medians = race(variants, a.rounds, device)
    for name, seconds in medians.items():
        print(f"{name}: {seconds / len(batches) * 1e3:.1f} ms per step (median of "
              f"{a.rounds} rounds)")
    hand_t = medians["hand-written eager"]
    print(f"eager_ratio: {medians['graph eager'] / hand_t:.3f}")
    print(f"compile_vs_eager_ratio: {medians['graph + torch.compile'] / hand_t:.3f}"
          + (" (torch.compile unavailable: eager)" if fast.fallbacks else ""))


if __name__ == "__main__":
    main()
