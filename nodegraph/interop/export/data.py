"""A graph's data as code: each data block's arrays made again, split and scaled as
nodegraph does, or read from an .npz written beside the script.

A *recipe*, declared on the data block (``recipe=``, `nodes/data/_recipes.py` for the built-in
ones), writes the numpy lines that make a built-in dataset's full `x` and `y` (an
sklearn loader, a seeded generator); the split and the normalisation follow the block's
shared data params (random, stratified or chronological; z-score or min-max fitted on the
training rows). The exporter runs the written function and compares every split with the
dataset nodegraph built: only an exact match is kept. Blocks without a recipe (files,
K-fold splits, generators a few lines cannot repeat) and recipes that no longer match get
their split tensors saved to an .npz next to the script instead, so the numbers always
agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from nodegraph.kinds.dataset import Dataset
from nodegraph.runtime.compile import Compiled

SPLITS = ("train", "val", "test")


@dataclass
class DataCode:
    """How the script loads one data block."""

    node: str
    function: str  # name of the load function
    text: str  # its definition
    imports: list[tuple[str, str, str]]  # (module, name, alias) for Source.add_import
    arrays: dict[str, np.ndarray] | None = None  # for the .npz, when there is no recipe
    definitions: list[str] = field(default_factory=list)  # classes the function uses
    torchvision: bool = False  # the function imports torchvision.transforms.v2


SKLEARN = ("load_iris", "load_wine", "load_breast_cancer", "load_diabetes", "load_digits",
           "make_moons", "make_circles", "make_blobs")


# -- split and scale -----------------------------------------------------------------------


def _split_lines(p) -> list[str] | None:
    """Lines making `splits` (rows per split) as `nodegraph.kinds.dataset.split_indices` does;
    None for K-fold, which the .npz carries instead."""
    val, test = p.get("val_fraction", 0.0), p.get("test_fraction", 0.0)
    if p.get("folds", 0):
        return None
    if not val and not test:
        return []
    mode, seed = p.get("split", "random"), p.get("split_seed", 0)
    if mode == "chronological":
        return ["n = len(x)", f"n_test, n_val = round(n * {test!r}), round(n * {val!r})",
                'splits = {"train": np.arange(n - n_val - n_test),',
                '          "val": np.arange(n - n_val - n_test, n - n_test),',
                '          "test": np.arange(n - n_test, n)}']
    if mode == "stratified":
        return [f"rng = np.random.default_rng({seed})",
                "labels = y.reshape(len(y), -1)[:, 0]",
                'splits = {"train": [], "val": [], "test": []}',
                "for label in np.unique(labels):  # each class is split in the same shares",
                "    rows = rng.permutation(np.flatnonzero(labels == label))",
                f"    n_test, n_val = round(len(rows) * {test!r}), round(len(rows) * {val!r})",
                '    splits["test"].append(rows[:n_test])',
                '    splits["val"].append(rows[n_test:n_test + n_val])',
                '    splits["train"].append(rows[n_test + n_val:])',
                "splits = {name: np.sort(np.concatenate(rows)) for name, rows in "
                "splits.items()}"]
    return [f"order = np.random.default_rng({seed}).permutation(len(x))",
            f"n_test, n_val = round(len(x) * {test!r}), round(len(x) * {val!r})",
            'splits = {"train": np.sort(order[n_test + n_val:]),',
            '          "val": np.sort(order[n_test:n_test + n_val]),',
            '          "test": np.sort(order[:n_test])}']


def _normalise_lines(p, split: bool) -> list[str]:
    how = p.get("normalize", "none")
    if how == "none":
        return []
    train = 'x[splits["train"]]' if split else "x"
    stats = ("train.mean(axis=0), train.std(axis=0)" if how == "zscore" else
             "train.min(axis=0), train.max(axis=0) - train.min(axis=0)")
    return [f"train = {train}  # statistics of the training rows only",
            f"centre, scale = {stats}",
            "x = (x - centre) / np.where(scale > 0, scale, 1.0)"]


def _tensor(port: str, t: torch.Tensor, rows: str = "") -> str:
    dtype = "torch.long" if t.dtype == torch.long else str(t.dtype)  # the graph's dtype
    return f'"{port}": torch.as_tensor({port}{rows}, dtype={dtype})'


# -- one data block ------------------------------------------------------------------------


def data_code(compiled: Compiled, node: str, function: str, npz_name: str) -> DataCode:
    """The load function of data block `node`: a checked recipe, else the .npz."""
    spec, p = compiled.report.specs[node], compiled.report.params[node]
    dataset = compiled.datasets[node]
    recipe = spec.recipe
    lines = recipe(p) if recipe is not None else None
    splits = _split_lines(p)
    if lines is not None and splits is not None and set(dataset.ports) == {"x", "y"}:
        code = _recipe_function(function, f"{spec.id} '{node}'", lines, splits, p, dataset)
        imports = [("numpy", "", "np"), ("torch", "", "")]
        imports += [("sklearn.datasets", name, "") for name in SKLEARN if name + "(" in code]
        if _reproduces(code, function, imports, dataset):
            return DataCode(node, function, code, imports)
    return _saved(node, function, spec.id, npz_name, dataset)


def _recipe_function(function: str, what: str, lines: list[str], splits: list[str], p,
                     dataset: Dataset) -> str:
    tensors = {port: dataset.tensors("train")[port] for port in ("x", "y")}
    body = [*lines, *splits, *_normalise_lines(p, bool(splits))]
    if splits:
        (x, y) = (_tensor(port, t, "[rows]") for port, t in tensors.items())
        body += ["return {name: {" + x + ",", "               " + y + "}",
                 "        for name, rows in splits.items() if len(rows)}"]
    else:
        (x, y) = (_tensor(port, t) for port, t in tensors.items())
        body += ['return {"train": {' + x + ",", "                  " + y + "}}"]
    doc = f'    """{what}: its splits as tensors by port, as nodegraph makes them."""'
    return "\n".join([f"def {function}():", doc, *("    " + line for line in body)])


def _reproduces(code: str, function: str, imports: list, dataset: Dataset) -> bool:
    """True when the written function gives exactly nodegraph's splits."""
    namespace: dict[str, Any] = {}
    try:
        for module, name, alias in imports:
            exec(f"from {module} import {name}" if name else
                 f"import {module}" + (f" as {alias}" if alias else ""), namespace)
        exec(code, namespace)
        made = namespace[function]()
    except Exception:
        return False
    present = [s for s in SPLITS if dataset.has(s)]
    if list(made) != present:
        return False
    return all(set(made[s]) == set(dataset.tensors(s)) and all(
        made[s][k].dtype == t.dtype and made[s][k].shape == t.shape
        and torch.equal(made[s][k], t.cpu()) for k, t in dataset.tensors(s).items())
        for s in present)


def _names(names) -> str:
    """A tuple of names as the project writes it: ("x", "y")."""
    return "(" + ", ".join(f'"{n}"' for n in names) + ("," if len(names) == 1 else "") + ")"


def _saved(node: str, function: str, block: str, npz_name: str, dataset: Dataset) -> DataCode:
    present = [s for s in SPLITS if dataset.has(s)]
    # numpy has no bfloat16: such ports are saved as float32 (exactly) and cast back
    arrays = {f"{node}/{s}/{port}": (t.float() if t.dtype == torch.bfloat16 else t).cpu().numpy()
              for s in present for port, t in dataset.tensors(s).items()}
    ports = dataset.ports
    bf16 = [p for p, t in dataset.tensors(present[0]).items() if t.dtype == torch.bfloat16]
    cast = [] if not bf16 else [
        "for part in data.values():  # saved as float32: numpy has no bfloat16",
        f"    for port in {_names(bf16)}:",
        "        part[port] = part[port].to(torch.bfloat16)"]
    text = "\n".join([
        f"def {function}():",
        f'    """{block} \'{node}\': its splits as nodegraph made them, saved beside this '
        'script."""',
        f'    with np.load(Path(__file__).with_name("{npz_name}")) as arrays:',
        f"        data = {{name: {{port: torch.from_numpy(arrays[f\"{node}/{{name}}/{{port}}\"])",
        f"                       for port in {_names(ports)}}}",
        f"                for name in {_names(present)}}}",
        *("    " + line for line in cast),
        "    return data"])
    imports = [("numpy", "", "np"), ("torch", "", ""), ("pathlib", "Path", "")]
    return DataCode(node, function, text, imports, arrays)
