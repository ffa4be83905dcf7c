"""The figures of examples/README.md, made again from fresh runs and written back.

A figure in the README sits between two HTML comments, invisible when rendered:

    accuracy <!--fig:xor.train_accuracy-->1.0<!--/fig--> (all four points)

The name says which example and which number; `EXAMPLES` below says how each example is
run (its file as it is, through `nodegraph.train`, or only compiled for a parameter count)
and how each number is read and printed. So a figure cannot drift from the code without a
run saying so:

    python tools/example_figures.py            # rerun the fast examples, rewrite their figures
    python tools/example_figures.py --slow     # the slow ones too (detection: minutes each)
    python tools/example_figures.py --check    # change nothing; exit 1 listing stale figures

`tests/test_example_figures.py` runs `--check` on the fast examples in CI; the slow ones
(trained for minutes) are regenerated with `--slow` whenever their blocks change. A marker
whose name the table does not know, and a known figure with no marker, are errors too.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "examples" / "README.md"
MARKER = re.compile(r"<!--fig:([\w.]+)-->(.*?)<!--/fig-->")


def number(digits: int) -> Callable[[float], str]:
    """Fixed decimals, with the typographic minus the README uses."""
    return lambda v: f"{v:.{digits}f}".replace("-", "−")


def count(v: float) -> str:
    return f"{int(v):,}"


@dataclass(frozen=True)
class Example:
    """How one example is run, and its figures: name -> (read the number, print it)."""

    file: str
    slow: bool  # a full run takes minutes: regenerated on demand, not in CI
    figures: dict[str, tuple[Callable[[Any], float], Callable[[float], str]]]
    train: bool = True  # False: compiled only (parameter counts)


def final(split: str, key: str) -> Callable[[Any], float]:
    """A number of the run's final evaluation."""
    return lambda run: run.final[split][key]


def weight(node: str, name: str) -> Callable[[Any], float]:
    """One scalar weight of a trained node."""
    return lambda run: float(getattr(run.module.module_of(node), name).detach().reshape(-1)[0])


def params(compiled: Any) -> float:
    return compiled.parameter_count()


def _detection(name: str) -> dict[str, Example]:
    """Two runs of a detection example: its parameter count (compiled, fast) and the
    trained mAPs (slow)."""
    maps = {f"{split}_{key}": (final(split, f"map.{key}"), number(3))
            for split, keys in (("train", ("map_50", "map")), ("val", ("map_50", "map")),
                                ("test", ("map_50", "map_75", "map")))
            for key in keys}
    return {f"{name}_size": Example(f"{name}.json", False, {"params": (params, count)},
                                    train=False),
            name: Example(f"{name}.json", True, maps)}


EXAMPLES: dict[str, Example] = {
    "xor": Example("xor.json", False, {
        "train_accuracy": (final("train", "accuracy"), number(1)),
        "train_loss": (final("train", "loss"), number(4))}),
    "line_fit": Example("line_fit.json", False, {
        "slope": (weight("line", "weight"), number(3)),
        "intercept": (weight("line", "bias"), number(3)),
        "train_mse": (final("train", "loss"), number(4)),
        "val_mse": (final("val", "loss"), number(4))}),
    **_detection("yolo_shapes"), **_detection("rcnn_shapes"), **_detection("detr_shapes"),
}


def measure(key: str) -> dict[str, str]:
    """The figures of `EXAMPLES[key]`, printed, from a fresh run of its file."""
    import nodegraph

    example = EXAMPLES[key]
    graph = nodegraph.load(ROOT / "examples" / example.file)
    made: Any = nodegraph.train(graph) if example.train else nodegraph.compile(graph)
    return {f"{key}.{name}": show(read(made)) for name, (read, show) in example.figures.items()}


def rewrite(text: str, fresh: dict[str, str]) -> tuple[str, list[str]]:
    """`text` with the figures of `fresh` written in; the names whose text changed."""
    changed = []

    def put(m: re.Match) -> str:
        name, old = m.group(1), m.group(2)
        if name not in fresh:
            return m.group(0)
        if fresh[name] != old:
            changed.append(f"{name}: {old} -> {fresh[name]}")
        return f"<!--fig:{name}-->{fresh[name]}<!--/fig-->"

    return MARKER.sub(put, text), changed


def problems(text: str) -> list[str]:
    """Markers the table does not know, and known figures the README does not show."""
    shown = {m.group(1) for m in MARKER.finditer(text)}
    known = {f"{key}.{name}" for key, ex in EXAMPLES.items() for name in ex.figures}
    return ([f"unknown figure {n}" for n in sorted(shown - known)] +
            [f"figure {n} is not in {README.name}" for n in sorted(known - shown)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slow", action="store_true", help="run the slow examples too")
    parser.add_argument("--only", nargs="+", choices=sorted(EXAMPLES), help="these examples")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 when a figure differs from a fresh run")
    args = parser.parse_args(argv)
    keys = args.only or [k for k, ex in EXAMPLES.items() if args.slow or not ex.slow]
    fresh: dict[str, str] = {}
    for key in keys:
        fresh.update(measure(key))
        print(f"{key}: " + ", ".join(f"{n.split('.', 1)[1]} {v}" for n, v in fresh.items()
                                     if n.startswith(key + ".")), flush=True)
    text = README.read_text(encoding="utf-8")  # read after the runs, which may take long
    wrong = problems(text)
    new, changed = rewrite(text, fresh)
    for line in [*wrong, *changed]:
        print(line)
    if args.check:
        return 1 if wrong or changed else 0
    if new != text:
        README.write_text(new, encoding="utf-8")
        print(f"{README.relative_to(ROOT)}: {len(changed)} figure(s) rewritten")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
