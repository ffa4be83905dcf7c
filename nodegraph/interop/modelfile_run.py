"""`run.json` of a saved model, type-checked field by field when the model is loaded.

What a later `fit`, `predict` or `repr` will use must be refused at `load_model`, naming the
field, not fail later inside torch: an `lr` that is text, a step count of 10**30, millions
of history entries. The history and the final numbers are checked for their shape; the
optimizers' hyper-parameters and the schedules' states are checked against those the
compiled graph builds (same keys, same kinds of value, finite numbers), so that
`load_state_dict` can only set what a fresh optimizer or schedule already has.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, TypeGuard

from nodegraph.interop.modelfile_archive import damaged
from nodegraph.model.errors import NodegraphError

MAX_EPOCHS = 100_000  # history entries (10 MB of run.json holds about 50,000 real ones)
MAX_CONTAINERS = 1_000_000  # objects and arrays in run.json: each costs ~64 bytes parsed
MAX_STEP = 10 ** 12  # a step count (or a schedule's): far beyond any run, far below 10**30
MAX_KEYS = 10_000  # keys in one epoch's numbers, callbacks, states


def check_run(path: Path, run: Any, format_: str, version: int) -> dict:
    """`run` (parsed run.json) with every field the loader reads of its type and bounds."""
    def bad(problem: str) -> NodegraphError:
        return damaged(path, "run.json", problem)

    if not isinstance(run, dict) or run.get("format") != format_:
        raise bad(f"it does not say format '{format_}'")
    v = run.get("version")
    if not _int(v) or not 1 <= v <= version:
        raise bad(f"its version {str(v)[:40]} is not one this nodegraph reads (1 to "
                  f"{version}); a newer file needs a newer nodegraph")
    kinds = {"history": list, "final": dict, "cancelled": bool, "stopped_early": bool,
             "optimizers": dict, "schedules": dict}
    for key, kind in kinds.items():
        if not isinstance(run.get(key), kind):
            raise bad(f"'{key}' should be a JSON {_NAMES[kind]}")
    step = run.get("global_step")
    if not _int(step) or not 0 <= step <= MAX_STEP:
        raise bad(f"'global_step' should be a whole number from 0 to {MAX_STEP:,}, not "
                  f"{str(step)[:40]}")
    history = run["history"]
    if len(history) > MAX_EPOCHS:
        raise bad(f"'history' holds {len(history):,} entries; at most {MAX_EPOCHS:,}")
    for i, entry in enumerate(history, 1):
        _check_entry(bad, entry, i)
    for split, stats in run["final"].items():
        _numbers(bad, stats, f"final.{split}"[:60])
    callbacks = run.get("callbacks", {})
    if not isinstance(callbacks, dict) or len(callbacks) > MAX_KEYS or not all(
            isinstance(v, dict) for v in callbacks.values()):
        raise bad("'callbacks' should be an object of one object per callback")
    return run


def _check_entry(bad: Any, entry: Any, i: int) -> None:
    if not isinstance(entry, dict):
        raise bad(f"'history' entry {i} is not an object (one object per epoch)")
    if entry.get("epoch") != i or not _int(entry.get("epoch")):
        raise bad(f"'history' entry {i} says epoch {str(entry.get('epoch'))[:40]}; epochs are "
                  "numbered 1, 2, ... in order")
    for split in ("train", "val"):
        if split in entry:
            _numbers(bad, entry[split], f"history[{i}].{split}")
    lr = entry.get("lr", {})
    if not isinstance(lr, dict) or not all(_finite(x) for x in lr.values()):
        raise bad(f"history[{i}].lr should map optimizers to finite numbers")
    if "seconds" in entry and not _number(entry["seconds"]):
        raise bad(f"history[{i}].seconds should be a number")
    if "stage" in entry and not isinstance(entry["stage"], str):
        raise bad(f"history[{i}].stage should be text")
    if "changes" in entry and not (isinstance(entry["changes"], list) and all(
            isinstance(c, dict) for c in entry["changes"])):
        raise bad(f"history[{i}].changes should be a list of objects")


def _numbers(bad: Any, stats: Any, where: str) -> None:
    """An epoch's (or the final) numbers: an object of numbers, text, true/false or null."""
    if not isinstance(stats, dict) or len(stats) > MAX_KEYS:
        raise bad(f"{where} should be an object of numbers")
    for k, v in stats.items():
        if not _value(v):
            raise bad(f"{where}.{k[:60]} should be a number (or a list of numbers, as a "
                      "per-bin metric gives)")


def _value(v: Any, depth: int = 0) -> bool:
    """A metric's value: a number, text, true/false, null, or lists and objects of them
    (a per-class or per-bin metric), nested a few levels at most."""
    if v is None or isinstance(v, bool | str) or _number(v):
        return True
    if depth >= 4:
        return False
    if isinstance(v, list):
        return all(_value(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return all(_value(x, depth + 1) for x in v.values())
    return False


def check_optimizers(path: Path, saved: dict, templates: dict[str, dict]) -> None:
    """Each saved optimizer's state meta held to the compiled optimizer's `state_dict()`
    (`templates`, by node): its node, its param groups' keys, kinds and lengths."""
    for node, meta in saved.items():
        where = f"optimizers.{node[:60]}"
        if node not in templates:
            raise damaged(path, "run.json", f"{where}: the graph has no optimizer '{node}'")
        template = templates[node]
        if not isinstance(meta, dict) or not isinstance(meta.get("state"), dict) \
                or not isinstance(meta.get("param_groups"), list):
            raise damaged(path, "run.json", f"{where} should hold 'state' and 'param_groups'")
        groups, want = meta["param_groups"], template["param_groups"]
        if len(groups) != len(want):
            raise damaged(path, "run.json", f"{where} has {len(groups)} parameter groups; the "
                          f"graph's optimizer has {len(want)}")
        count = sum(len(g["params"]) for g in want)
        for k, (group, like) in enumerate(zip(groups, want, strict=True)):
            if not isinstance(group, dict) or group.get("params") != like["params"]:
                raise damaged(path, "run.json", f"{where}.param_groups[{k}] does not list "
                              "the graph's parameters")
            _like(path, f"{where}.param_groups[{k}]", group, like, finite=True)
        for idx, entry in meta["state"].items():
            if not (idx.isdigit() and int(idx) < count and isinstance(entry, dict)
                    and len(entry) <= 64):
                raise damaged(path, "run.json", f"{where}.state has an entry "
                              f"'{str(idx)[:20]}' for no parameter of it")
            for key, value in entry.items():
                if not (value is None or isinstance(value, bool) or _finite(value)) or (
                        _int(value) and abs(value) > MAX_STEP):
                    raise damaged(path, "run.json", f"{where}.state.{idx}.{key[:40]} should "
                                  "be a finite number")


def check_schedules(path: Path, saved: dict, templates: dict[str, dict]) -> None:
    """Each saved schedule state held to the compiled schedule's `state_dict()`: no key a
    fresh one lacks, every value of the same kind (and counts bounded)."""
    for node, state in saved.items():
        where = f"schedules.{node[:60]}"
        if node not in templates:
            raise damaged(path, "run.json", f"{where}: the graph's optimizer '{node[:60]}' "
                          "has no schedule")
        _like(path, where, state, templates[node], finite=False)


def _like(path: Path, where: str, value: Any, like: Any, finite: bool) -> None:
    """`value` of the kind `like` is: a number for a number (finite, when `finite` or an
    integer, bounded), the same for booleans and text, a list of the same length, an object
    whose keys the template has, the template's own text (modes and keys come from the
graph's params); a null in the template accepts a number too."""
    def bad(problem: str) -> NodegraphError:
        return damaged(path, "run.json", f"{where} {problem}")

    if isinstance(like, dict):
        if not isinstance(value, dict):
            raise bad("should be an object")
        unknown = [k for k in value if k not in like]
        if unknown:
            raise bad(f"has '{str(unknown[0])[:40]}', which the graph's own has not")
        for k, v in value.items():
            _like(path, f"{where}.{k}", v, like[k], finite)
    elif isinstance(like, list | tuple):
        if not isinstance(value, list) or len(value) != len(like):
            raise bad(f"should be a list of {len(like)}")
        for k, (v, w) in enumerate(zip(value, like, strict=True)):
            _like(path, f"{where}[{k}]", v, w, finite)
    elif isinstance(like, bool):
        if not isinstance(value, bool):
            raise bad("should be true or false")
    elif isinstance(like, int | float) or like is None or hasattr(like, "item"):
        # a number (a 0-d tensor in torch's own state: a tensor lr)
        if like is None and value is None:
            return
        if not _number(value):
            raise bad(f"should be a number, not {str(value)[:40]!r}")
        if _int(value) and abs(value) > MAX_STEP:
            raise bad(f"is {str(value)[:40]}; at most {MAX_STEP:,}")
        if finite and not math.isfinite(value):
            raise bad("should be a finite number")
        if isinstance(value, float) and math.isnan(value):
            raise bad("is not a number (NaN)")
    elif isinstance(like, str):  # a mode, an anneal function, a key: set by the graph
        if value != like:
            raise bad(f"should be {like!r} as the graph sets it, not {str(value)[:40]!r}")
    elif value != like:  # anything else a state holds (rare): only what the graph's has
        raise bad("differs from what the graph builds")


def _int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and (
        not isinstance(v, int) or abs(v) <= MAX_STEP)


def _finite(v: Any) -> bool:
    return _number(v) and math.isfinite(v)


_NAMES = {list: "array", dict: "object", bool: "true or false"}

