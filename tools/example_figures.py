"""The figures of examples/README.md and README.md, made again from fresh runs and written back.

A figure in either README sits between two HTML comments, invisible when rendered:

    accuracy <!--fig:xor.train_accuracy-->1.0<!--/fig--> (all four points)

The name says which run and which number; `tools/example_runs.py` says how each run is made
(an example's file as it is, or with params set, another seed or epoch count; trained,
only compiled for a parameter count, or a procedure run after training) and how each number
is read and printed. So a figure cannot drift from the code without a run saying so:

    python tools/example_figures.py               # rerun the fast runs, rewrite their figures
    python tools/example_figures.py --slow        # the slow ones too (minutes each)
    python tools/example_figures.py --slow NAME   # only the slow run NAME (and its fingerprint)
    python tools/example_figures.py --check       # change nothing; exit 1 on stale figures

Runs are seeded, on the CPU with one torch thread, so on the machine that made them the
figures come out digit for digit. Another CPU sums in another order (vector width, BLAS
kernels), and a trained run amplifies the last bits: issue 32's machine printed
deep_relu_he's 94.7 as 95.3. So `--check` compares each figure within a tolerance that fits
its kind (`tolerance()`): a count exactly, unless it is a trained net's and moved when
measured; any other number by MARGIN (2) times its spread measured by
`tools/figure_spread.py` (the fast runs again with torch's scalar kernels, MKL's SSE4.2
kernels, two threads, and the figures issue 32's machine printed; recorded in
`tools/figure_spread.json` with each setting's value)
and at least one unit of its last digit; an index a run picks (the best epoch) by the
values at the text's index and at the fresh one. Writing (no `--check`) prints what the
run made: the READMEs show what one run printed.

`tests/test_example_figures.py` runs `--check` in CI. It reruns the fast runs; the slow
ones (trained for minutes) cannot run there, so each leaves a record in
`tools/example_figures.json`: the figures it printed and a fingerprint of what it depends
on, a hash of the example's file and of the source of every module its blocks are built
by (the registry's `spec.build.__module__`, the `nodes` modules those import, shipped
groups' files). When a fingerprint no longer matches, the check fails, naming the changed
files and the command that regenerates the figures; a slow figure whose text differs from
its run's record fails too. A marker whose name no run knows, a known figure with no
marker, and a slow figure with no record are errors as well.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the run table lives beside us
from example_runs import EXAMPLES, Example, count  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = (ROOT / "examples" / "README.md", ROOT / "README.md")
FINGERPRINTS = ROOT / "tools" / "example_figures.json"
SPREAD = ROOT / "tools" / "figure_spread.json"  # each figure's measured machine spread
MARKER = re.compile(r"<!--fig:([\w.]+)-->(.*?)<!--/fig-->")
NUMBER = re.compile(r"[−-]?\d[\d,]*(?:\.\d+)?(?:e[−-]?\d+)?")


# an index figure's value at the text's index and at the fresh one (`Figure.picks`)
PICKED: dict[str, tuple[float, float]] = {}


def measure(key: str, shown: dict[str, str] | None = None) -> dict[str, str]:
    """The figures of run `key`, printed, from a fresh run of its file. For an index
    figure the text of `shown` names, PICKED gets the number at both indices."""
    import nodegraph

    example = EXAMPLES[key]
    graph = nodegraph.load(ROOT / "examples" / example.file)
    for target, setting in example.sets.items():
        node, param = target.split(".", 1)
        graph.set_param(node, param, setting)
    made = example.run(graph)
    out = {}
    for name, fig in example.figures.items():
        index = fig.read(made)
        out[f"{key}.{name}"] = fig.show(index)
        old = value((shown or {}).get(f"{key}.{name}", ""))
        if fig.picks is not None and old is not None:
            try:
                PICKED[f"{key}.{name}"] = (fig.picks(made, int(old)), fig.picks(made, int(index)))
            except IndexError:  # the text's epoch is past this run's end
                PICKED[f"{key}.{name}"] = (float("inf"), fig.picks(made, int(index)))
    return out


def value(text: str) -> float | None:
    """The number a figure's text shows (typographic minus, thousands commas)."""
    m = NUMBER.search(text)
    return None if m is None else float(m.group(0).replace(",", "").replace("−", "-"))


_value = value


def shown_texts() -> dict[str, str]:
    """Every marked figure's text in the documents, by name."""
    return {m.group(1): m.group(2) for path in DOCUMENTS
            for m in MARKER.finditer(path.read_text(encoding="utf-8"))}


MARGIN = 2  # times the largest distance measured (issue 32's machine among the settings)


def tolerance(name: str, text: str) -> float:
    """How far a fresh run may print `name` from `text` and still agree with it.

    A count (parameters, hand-set convolution outputs) is exact unless it moved under the
    arithmetic settings of `tools/figure_spread.py` (a count of a trained net's regions
    does); any other number may differ by MARGIN times that measured spread, and by at least
    one unit of its last printed digit (a value on a rounding edge); a figure's own stated
    `tolerance` widens that."""
    key, figure = name.split(".", 1)
    fig = EXAMPLES[key].figures[figure]
    measured = (read_spread().get(name) or {}).get("machine") or 0.0
    digits = text.split(".", 1)[1] if "." in text else ""
    decimals = len(re.match(r"\d*", digits).group(0)) if digits else 0  # type: ignore[union-attr]
    unit = 0.0 if fig.show is count else 10.0 ** -decimals
    return max(MARGIN * measured, unit, fig.tolerance)


def read_spread() -> dict[str, dict[str, Any]]:
    return (json.loads(SPREAD.read_text(encoding="utf-8")) if SPREAD.exists() else {})


def differs(name: str, old: str, new: str) -> bool:
    """Whether `old` (the README's text) is stale against `new` (a fresh run): beyond the
    figure's tolerance; for an index (the best epoch), by the values at the two indices."""
    key, figure = name.split(".", 1)
    fig = EXAMPLES[key].figures[figure]
    if old == new:
        return False
    if fig.picks is not None and name in PICKED:
        at_old, at_new = PICKED[name]
        like = f"{key}.{fig.like}"
        return abs(at_old - at_new) > tolerance(like, _shown_like(like, at_new)) + 1e-12
    a, b = value(old), value(new)
    return a is None or b is None or abs(a - b) > tolerance(name, old) + 1e-12


def _shown_like(name: str, number: float) -> str:
    key, figure = name.split(".", 1)
    return EXAMPLES[key].figures[figure].show(number)


def rewrite(text: str, fresh: dict[str, str], check: bool = False) -> tuple[str, list[str]]:
    """`text` with the figures of `fresh` written in; the names whose text changed (under
    `check`, only those beyond their tolerance)."""
    changed = []

    def put(m: re.Match) -> str:
        name, old = m.group(1), m.group(2)
        if name not in fresh or fresh[name] == old:
            return m.group(0)
        if not check or differs(name, old, fresh[name]):
            changed.append(f"{name}: {old} -> {fresh[name]}")
        return f"<!--fig:{name}-->{fresh[name]}<!--/fig-->"

    return MARKER.sub(put, text), changed


def known() -> set[str]:
    return {f"{key}.{name}" for key, ex in EXAMPLES.items() for name in ex.figures}


def problems(texts: dict[str, str]) -> list[str]:
    """Markers no run knows, and known figures no document shows."""
    shown = {m.group(1) for text in texts.values() for m in MARKER.finditer(text)}
    names = " or ".join(texts)
    return ([f"unknown figure {n}" for n in sorted(shown - known())] +
            [f"figure {n} is not in {names}" for n in sorted(known() - shown)])


# -- fingerprints of the slow runs ------------------------------------------------------


def sources(example: Example) -> list[Path]:
    """The files a run of `example` depends on: its graph file, and the source of every
    module that builds one of its blocks (groups' bodies walked, shipped groups' files)."""
    import nodegraph
    from nodegraph.model.groupdefs import PREFIX, definition

    graph = nodegraph.load(ROOT / "examples" / example.file)
    files = {ROOT / "examples" / example.file, *(ROOT / f for f in example.depends)}
    seen: set[str] = set()

    def walk(body: Any) -> None:
        for node in body:
            if node.type in seen:
                continue
            seen.add(node.type)
            if node.type.startswith(PREFIX):
                defn = definition(graph, node.type[len(PREFIX):])
                if node.type[len(PREFIX):] not in graph.groups:  # shipped with the library
                    files.update((ROOT / "nodes" / "group_files").glob("*.json"))
                if defn is not None:
                    walk(defn.body)
                continue
            build = graph.registry.get(node.type).build
            module = sys.modules.get(getattr(build, "__module__", type(build).__module__))
            where = getattr(module, "__file__", None)
            if where:
                files.add(Path(where).resolve())

    walk(graph)
    for defn in graph.groups.values():
        walk(defn.body)
    return sorted(_with_imports(files))


def _with_imports(files: set[Path]) -> set[Path]:
    """`files` and the modules of the `nodes` package they import, transitively: a block
    module often keeps its torch code in a private module beside it."""
    package = ROOT / "nodes"
    todo, done = [f for f in files if f.suffix == ".py"], set(files)
    while todo:
        path = todo.pop()
        here = path.relative_to(ROOT).with_suffix("").parts[:-1]  # its package, as parts
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.ImportFrom):
                base = (list(here[:len(here) - node.level + 1]) if node.level
                        else [])
                names = [[*base, *(node.module or "").split(".")]] if node.module else []
                names += [[*base, *(node.module or "").split("."), a.name] for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name.split(".") for a in node.names]
            else:
                continue
            for parts in names:
                parts = [p for p in parts if p]
                if not parts or parts[0] != "nodes":
                    continue
                for found in (package.parent.joinpath(*parts).with_suffix(".py"),
                              package.parent.joinpath(*parts, "__init__.py")):
                    if found.is_file() and found not in done:
                        done.add(found)
                        todo.append(found)
    return done


def fingerprint(example: Example) -> dict[str, str]:
    """Each source of `example` (relative to the repository) -> the start of its SHA-256."""
    out = {}
    for path in sources(example):
        try:
            name = path.relative_to(ROOT).as_posix()
        except ValueError:  # a block from an installed package outside the repository
            name = path.name
        out[name] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return out


def read_fingerprints() -> dict[str, dict[str, dict[str, str]]]:
    """The slow runs' records: run -> {"sources": fingerprint, "figures": name -> text}."""
    return (json.loads(FINGERPRINTS.read_text(encoding="utf-8"))
            if FINGERPRINTS.exists() else {})


def stale_slow(texts: dict[str, str]) -> list[str]:
    """Slow runs shown in a document whose record is missing, whose sources changed since
    (the fingerprint), or whose figures in the text are not what that run printed."""
    shown: dict[str, dict[str, str]] = {}
    for text in texts.values():
        for m in MARKER.finditer(text):
            key = m.group(1).split(".", 1)[0]
            if key in EXAMPLES and EXAMPLES[key].slow:
                shown.setdefault(key, {})[m.group(1)] = m.group(2)
    recorded = read_fingerprints()
    out = []
    for key in sorted(shown):
        again = f"regenerate with tools/example_figures.py --slow {key}"
        then = recorded.get(key)
        if then is None:
            out.append(f"{key}: no fingerprint recorded; {again}")
            continue
        now, before = fingerprint(EXAMPLES[key]), then["sources"]
        if now != before:
            moved = sorted(f for f in set(now) | set(before) if now.get(f) != before.get(f))
            out.append(f"{key}: changed since its figures were made: {', '.join(moved)}; "
                       f"{again}")
        for name, text in sorted(shown[key].items()):
            made = then["figures"].get(name)
            if made != text:  # the text is what that run printed, to the digit
                out.append(f"{name}: the text shows {text}, its last run made {made}; {again}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slow", nargs="*", metavar="NAME",
                        help="run the slow runs too; with names, only those")
    parser.add_argument("--only", nargs="+", choices=sorted(EXAMPLES), help="these runs")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 when a figure differs from a fresh run")
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="only write the fresh figures to FILE (for tools/figure_spread.py)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads of every run (the figures: 1)")
    parser.add_argument("--seed", type=int, help="every trained run with this seed")
    args = parser.parse_args(argv)
    import example_runs

    example_runs.THREADS, example_runs.SEED = args.threads, args.seed
    for name in args.slow or ():
        if name not in EXAMPLES:
            parser.error(f"--slow: no run {name!r}")
    keys = (args.only or list(args.slow or ()) or
            [k for k, ex in EXAMPLES.items() if args.slow is not None or not ex.slow])
    fresh: dict[str, str] = {}
    before = shown_texts()
    for key in keys:
        start = time.process_time()
        fresh.update(measure(key, before))
        shown = ", ".join(f"{n.split('.', 1)[1]} {v}" for n, v in fresh.items()
                          if n.startswith(key + "."))
        print(f"{key} ({time.process_time() - start:.1f} s CPU): {shown}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(fresh, indent=1, ensure_ascii=False) + "\n",
                             encoding="utf-8")
        return 0
    if not args.check:  # the slow runs made now carry the fingerprint of what made them
        prints = read_fingerprints()
        made = {k: {"sources": fingerprint(EXAMPLES[k]),
                    "figures": {n: v for n, v in fresh.items() if n.split(".", 1)[0] == k}}
                for k in keys if EXAMPLES[k].slow}
        if any(prints.get(k) != v for k, v in made.items()):
            prints.update(made)
            FINGERPRINTS.write_text(json.dumps(dict(sorted(prints.items())), indent=1) + "\n",
                                    encoding="utf-8")
    # read after the runs, which may take long
    texts = {path.name if path.parent == ROOT else path.relative_to(ROOT).as_posix():
             path.read_text(encoding="utf-8") for path in DOCUMENTS}
    wrong = problems(texts) + stale_slow(texts)
    changes = []
    for path, (name, text) in zip(DOCUMENTS, texts.items(), strict=True):
        new, changed = rewrite(text, fresh, check=args.check)
        changes += [f"{name}: {line}" for line in changed]
        if not args.check and new != text:
            path.write_text(new, encoding="utf-8")
            print(f"{name}: {len(changed)} figure(s) rewritten")
    for line in [*wrong, *changes]:
        print(line)
    if args.check:
        return 1 if wrong or changes else 0
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
