"""Does the cost of a graph grow with its size, and no faster? Build, validate, compile.

Two shapes of graph, each at 1k, 5k and 20k nodes (`--sizes`):

- a *chain*: data -> Linear -> Linear -> ... -> MSE -> Adam, the widths following a de
  Bruijn sequence so every Linear sees a different (in, out) pair: no two nodes share a
  shape-cache entry, so validation infers every node;
- a *branchy* graph: a binary tree of Linear layers (node i fed by node (i-1)//2), its last
  node to the loss: fan-out everywhere, many leaves.

For each it times building with `g.connect` (checked edits: types, duplicates, cycles),
`validate` cold (after clearing the shape cache) and warm (again, as the editor does on
every edit), and `compile` (validation included), and prints the time at 5,000 nodes and
the power-law exponent fitted over the sizes (time ~ size ** k: 1 is linear, 2 quadratic).
Targets at 5,000 nodes: build < 0.1 s, validate < 0.5 s, compile < 0.5 s, each k <= 1.1.
Run with OMP_NUM_THREADS=1 on a quiet machine (or `--clock cpu` on a busy one); each
figure is the best of `--repeat`.

Single edits are timed too (`edits`): renaming a node in the middle of the graph, moving
it to the front of the graph's order, moving one of its wires to the front of the wire
order (what undo does), and deleting a node there (its wires go with it), each the median
of `EDITS` tries, with the exponent over the sizes: an edit costs what it touches, so its
exponent should stay near 0 (target <= 0.2).

Most of a compile is PyTorch making and initialising the layers, so beside it the script
times the same model written by hand (`by_hand`: the same Linear layers from the same seed,
and an Adam over them) and prints the ratio and the difference: what the graph adds.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import time
from collections.abc import Callable

import torch
from torch import nn

import nodegraph
from nodegraph.model import gcpause

ALPHABET = 150  # widths 16..165: 22,500 distinct (in, out) pairs, more than 20k nodes


def de_bruijn(k: int) -> list[int]:
    """A cyclic sequence over range(k) in which every ordered pair appears once."""
    a, out = [0] * (2 * k), []

    def db(t: int, p: int) -> None:  # the standard recursive construction, order 2
        if t > 2:
            if 2 % p == 0:
                out.extend(a[1:p + 1])
        else:
            a[t] = a[t - p]
            db(t + 1, p)
            for j in range(a[t - p] + 1, k):
                a[t] = j
                db(t + 1, t)

    db(1, 1)
    return out


WIDTHS = [16 + w for w in de_bruijn(ALPHABET)]


def chain(n: int) -> nodegraph.Graph:
    g = nodegraph.Graph(f"chain{n}")
    g.add("data.XOR", id="data")
    prev = ("data", "x")
    for i in range(n - 4):
        nid = g.add("layers.Linear", id=f"fc{i}", out_features=WIDTHS[i % len(WIDTHS)])
        g.connect(prev, (nid, "input"))
        prev = (nid, "output")
    return _finish(g, prev)


def branchy(n: int) -> nodegraph.Graph:
    g = nodegraph.Graph(f"tree{n}")
    g.add("data.XOR", id="data")
    count = n - 4
    for i in range(count):
        nid = g.add("layers.Linear", id=f"fc{i}", out_features=16 + i % ALPHABET)
        g.connect(("data", "x") if i == 0 else (f"fc{(i - 1) // 2}", "output"), (nid, "input"))
    return _finish(g, (f"fc{count - 1}", "output"))


def _finish(g: nodegraph.Graph, prev: tuple[str, str]) -> nodegraph.Graph:
    g.add("layers.Linear", id="head", out_features=1)
    g.add("losses.MSE", id="loss")
    g.add("optimizers.Adam", id="opt")
    g.connect(prev, ("head", "input"))
    g.connect(("head", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.update_training({"device": "cpu", "epochs": 1})
    return g


CLOCK = time.perf_counter


def best(fn: Callable[[], object], repeat: int, before: Callable[[], None] = lambda: None
         ) -> float:
    times = []
    for _ in range(repeat):
        before()
        times.append(timed_once(fn))
    return min(times)


def timed_once(fn: Callable[[], object]) -> float:
    """One run of `fn`, after an untimed full collection: the garbage an earlier run left
    (thousands of modules) is not collected inside this one's time."""
    gc.collect()
    start = CLOCK()
    fn()
    return CLOCK() - start


def best_pair(a: Callable[[], object], b: Callable[[], object], repeat: int
              ) -> tuple[float, float]:
    """The best of `repeat` runs of `a` and of `b`, interleaved (a, b, a, b, ...), so a
    slow spell of a shared machine falls on both sides of their ratio."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        times[0].append(timed_once(a))
        times[1].append(timed_once(b))
    return min(times[0]), min(times[1])


def clear_shape_cache() -> None:
    """Forget inferred shapes, so the next validation infers every node (cold)."""
    from nodegraph.check import opcache

    opcache.default(nodegraph.default_registry()).clear()


def by_hand(layers: list[tuple[int, int, bool]]) -> None:
    """The model a graph compiles to, written in PyTorch: its Linear layers (same sizes,
    same order, same seed) in a ModuleList, and an Adam over them."""
    torch.manual_seed(0)
    model = nn.ModuleList(nn.Linear(i, o, bias=b) for i, o, b in layers)
    torch.optim.Adam(model.parameters())


def linear_layers(graph: nodegraph.Graph) -> list[tuple[int, int, bool]]:
    blocks = nodegraph.compile(graph).module.blocks.values()
    return [(m.in_features, m.out_features, m.bias is not None)
            for m in blocks if isinstance(m, nn.Linear)]


def measure(make: Callable[[int], nodegraph.Graph], n: int, repeat: int) -> dict[str, float]:
    graph = make(n)
    assert len(graph) == n, (len(graph), n)
    report = nodegraph.validate(graph, for_training=True)
    if not report.ok:
        raise SystemExit(f"{graph.name} does not validate: {report.errors[:3]}")
    layers = linear_layers(graph)
    compiled, hand = best_pair(lambda: nodegraph.compile(graph), lambda: by_hand(layers),
                               repeat)
    return {
        "build": best(lambda: make(n), repeat),
        "validate cold": best(lambda: nodegraph.validate(graph, for_training=True), repeat,
                              clear_shape_cache),
        "validate warm": best(lambda: nodegraph.validate(graph, for_training=True), repeat),
        "compile": compiled,
        "by hand": hand,
    }


EDITS = 60  # tries of each single edit; the median is kept


def edits(graph: nodegraph.Graph) -> dict[str, float]:
    """The median time of one rename, node move, wire move and delete in the middle of
    `graph`; each kind in a loop of its own, undone (untimed) before the next try, except
    the deletes (different nodes, last)."""
    ids = list(graph.nodes)
    mid = ids[len(ids) // 2]
    times: dict[str, list[float]] = {"rename": [], "move node": [], "delete": [],
                                     "move wire": []}

    def timed(what: str, fn: Callable[[], object]) -> None:
        start = CLOCK()
        fn()
        times[what].append(CLOCK() - start)

    at = list(graph.nodes).index(mid)
    for _ in range(EDITS):  # each kind of edit in a loop of its own, undone untimed
        timed("rename", lambda: graph.rename(mid, "renamed"))
        graph.rename("renamed", mid)
    for _ in range(EDITS):
        timed("move node", lambda: graph.move_node(mid, 0))
        graph.move_node(mid, at)
    wire = graph.edges_into(mid)[0]
    index = graph._wires.index(wire)
    for _ in range(EDITS):
        timed("move wire", lambda: graph.move_edge(wire, 0))
        graph.move_edge(wire, index)
    assert list(graph.nodes)[at] == mid
    # deletes last, not undone (an undo re-inserts in C over the whole node order, which
    # would leave the next timed delete running on a cold cache): EDITS different nodes from
    # the middle on, every other one, each delete its own edit
    for victim in ids[len(ids) // 2:len(ids) // 2 + 2 * EDITS:2]:
        timed("delete", lambda victim=victim: graph.remove(victim))
    return {what: sorted(ts)[len(ts) // 2] for what, ts in times.items()}


TARGETS = {"build": 0.1, "validate cold": 0.5, "validate warm": 0.5, "compile": 0.5}


def exponent(sizes: list[int], times: list[float]) -> float:
    """The least-squares slope of log(time) on log(size)."""
    xs, ys = [math.log(s) for s in sizes], [math.log(max(t, 1e-9)) for t in times]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / \
        sum((x - mx) ** 2 for x in xs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (best kept)")
    parser.add_argument("--shapes", nargs="+", choices=("chain", "branchy"),
                        default=["chain", "branchy"])
    parser.add_argument("--only", choices=("all", "edits"), default="all",
                        help="edits: only the single-edit figures (quick)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: this thread's CPU time, immune to other processes on a busy "
                        "machine")
    args = parser.parse_args()
    gcpause.tune_process()  # as the CLI and the editor run: the collector kept out of the way
    global CLOCK
    if args.clock == "cpu":
        CLOCK = time.thread_time
    print(f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, {args.clock} clock, "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    at = 5000 if 5000 in args.sizes else args.sizes[len(args.sizes) // 2]
    # one-time costs (torch's lazy imports on the first optimizer, ~1.5 s) are not the
    # smallest size's: pay them on a small graph first
    nodegraph.compile(chain(8))
    for shape in args.shapes:
        make = chain if shape == "chain" else branchy
        per_edit = {n: edits(make(n)) for n in args.sizes}
        for n, row in per_edit.items():
            print(f"{shape} {n:>6} nodes, one edit: " +
                  ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in row.items()))
        for what in per_edit[args.sizes[0]]:
            k = exponent(args.sizes, [per_edit[n][what] for n in args.sizes])
            print(f"{shape} {what}: exponent {k:.2f} (target <= 0.2) "
                  f"{'ok' if k <= 0.2 else 'MISSED'}")
        if args.only == "edits":
            continue
        rows = {n: measure(make, n, args.repeat) for n in args.sizes}
        for n, row in rows.items():
            print(f"{shape} {n:>6} nodes: " + ", ".join(f"{k} {v:.3f} s" for k, v in row.items()))
        for step, target in TARGETS.items():
            k = exponent(args.sizes, [rows[n][step] for n in args.sizes])
            t = rows[at][step]
            ok = "ok" if t < target and k <= 1.1 else "MISSED"
            print(f"{shape} {step}: {t:.3f} s at {at} nodes (target < {target} s), "
                  f"exponent {k:.2f} (target <= 1.1) {ok}")
        hand = rows[at]["by hand"]
        k = exponent(args.sizes, [rows[n]["by hand"] for n in args.sizes])
        print(f"{shape} by hand: {hand:.3f} s at {at} nodes to make the same layers and Adam "
              f"in PyTorch, exponent {k:.2f}; compile/by hand {rows[at]['compile'] / hand:.2f}, "
              f"compile - by hand {rows[at]['compile'] - hand:.3f} s")


if __name__ == "__main__":
    main()
