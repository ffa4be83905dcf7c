"""Random damage to graph files, shared by the hostile-file fuzz test and `benchmarks/fuzz.py`.

`mutate(text, rng)` applies one to three mutations to a graph file's text and returns the
new text with a one-line description of each mutation, so a failing case can be read and
replayed from its seed alone. Structural mutations break the document's shape (a key
dropped, a value of the wrong JSON type, a node retyped, a group using itself or sharing
with itself, a wire to a port that does not exist); value mutations change one scalar
(an int off by one, zero, negative, NaN, a string where a number was); text mutations
damage the bytes (a BOM, trailing garbage, a cut, deep nesting). With `sane=True` the ints
stay within |v| <= 10**4 and nothing is made huge: what is left for the size checks of the
blocks is not the loader's to test.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.json"))

_STRINGS = ["", "é", "../up", "with space", "group.x", "__", "0abc", "a.b", "group.",
            "group.group.x", "x" * 300, "data", "output", "input", "loss", "\u0000", "None"]
_TYPES = ["layers.Linear", "activations.ReLU", "losses.MSE", "optimizers.Adam", "data.XOR",
          "group.UNet", "group.UNetBlock", "group.nope", "metrics.Accuracy", "layers.Conv2d",
          "procedures.SamplePrior", "opaque.Nope", "layers.Flatten", "attention.MultiHead"]


def _scalars(sane: bool) -> list[Any]:
    values: list[Any] = [None, True, False, 0, -1, 1, 2, 0.5, -0.0, float("nan"),
                         float("inf"), float("-inf"), 1e300, "", "1", "nan", [], {}, [1, 2],
                         {"a": 1}, [[1]], ["x"], [None], {"": None}]
    if not sane:
        values += [10**6, 2**31, 10**12, -(2**63), 10**30, [0] * 10_000]
    return values


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every JSON path in `doc` (the root is `()`)."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _get(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def _show(path: tuple) -> str:
    return "/" + "/".join(str(p) for p in path)


def _short(value: Any) -> str:
    text = json.dumps(value, allow_nan=True)
    return text if len(text) <= 40 else text[:37] + "..."


def _node_maps(doc: dict) -> list[tuple[tuple, dict]]:
    """(path, nodes dict) of the top level and of every group body."""
    out = []
    if isinstance(doc.get("nodes"), dict):
        out.append((("nodes",), doc["nodes"]))
    groups = doc.get("groups")
    if isinstance(groups, dict):
        for name, g in groups.items():
            if isinstance(g, dict) and isinstance(g.get("nodes"), dict):
                out.append((("groups", name, "nodes"), g["nodes"]))
    return out


# -- structural mutations: each takes (doc, rng, sane) and returns (doc, description) -------

def drop_key(doc, rng, sane):
    paths = [p for p in _paths(doc) if p and isinstance(_get(doc, p[:-1]), dict)]
    path = rng.choice(paths)
    del _get(doc, path[:-1])[path[-1]]
    return doc, f"drop {_show(path)}"


def wrong_type(doc, rng, sane):
    path = rng.choice(_paths(doc)[1:] or [()])
    value = rng.choice(_scalars(sane))
    return _set(doc, path, value), f"set {_show(path)} = {_short(value)}"


def swap_values(doc, rng, sane):
    paths = _paths(doc)[1:]
    a, b = rng.choice(paths), rng.choice(paths)
    value = json.loads(json.dumps(_get(doc, b)))  # a copy: a may lie inside b
    return _set(doc, a, value), f"copy {_show(b)} to {_show(a)}"


def retype_node(doc, rng, sane):
    maps = _node_maps(doc)
    if not maps:
        return wrong_type(doc, rng, sane)
    where, nodes = rng.choice(maps)
    if not nodes:
        return doc, "nothing to retype"
    node = rng.choice(list(nodes))
    types = _TYPES + [f"group.{g}" for g in (doc.get("groups") or {})] + [
        n.get("type") for _, m in maps for n in m.values() if isinstance(n, dict)]
    new = rng.choice([t for t in types if isinstance(t, str)])
    if isinstance(nodes[node], dict):
        nodes[node]["type"] = new
    else:
        nodes[node] = {"type": new, "params": {}}
    return doc, f"retype {_show((*where, node))} to {new}"


_PARAM_NAMES = ["out_features", "in_features", "kernel_size", "stride", "padding",
                "batch_size", "n", "scope", "model", "nodes", "lr", "split", "dropout", "shape",
                "num_heads", "hidden_size", "steps", "count", "dim", "share", "function"]


def set_param(doc, rng, sane):
    maps = _node_maps(doc)
    if not maps:
        return wrong_type(doc, rng, sane)
    where, nodes = rng.choice(maps)
    node = rng.choice(list(nodes)) if nodes else None
    if node is None or not isinstance(nodes[node], dict):
        return doc, "no node to set a param on"
    params = nodes[node].setdefault("params", {})
    if not isinstance(params, dict):
        return doc, "params not an object"
    name = rng.choice(list(params) + _PARAM_NAMES if params else _PARAM_NAMES)
    value = rng.choice(_scalars(sane) + _STRINGS[:8] + list(nodes) + [[node], [3, 3], [-1]])
    params[name] = value
    return doc, f"set {_show((*where, node, 'params', name))} = {_short(value)}"


def _registered() -> list[str]:
    from nodegraph.model.spec import default_registry

    return sorted(spec.id for spec in default_registry())


def _pick_node(maps, rng):
    """(where, nodes, node id) of a node in one of the node maps `_node_maps` found, or None
    when the map chosen is empty."""
    where, nodes = rng.choice(maps)
    return (where, nodes, rng.choice(list(nodes))) if nodes else None


def retype_any(doc, rng, sane):
    """A node becomes any registered block, its wires and params kept."""
    maps = _node_maps(doc)
    if not maps or not maps[0][1]:
        return wrong_type(doc, rng, sane)
    picked = _pick_node(maps, rng)
    if picked is None:
        return doc, "nothing to retype"
    where, nodes, node = picked
    new = rng.choice(_registered())
    if isinstance(nodes[node], dict):
        nodes[node]["type"] = new
    return doc, f"retype {_show((*where, node))} to {new}"


def rename_node(doc, rng, sane):
    maps = _node_maps(doc)
    if not maps:
        return drop_key(doc, rng, sane)
    picked = _pick_node(maps, rng)
    if picked is None:
        return doc, "nothing to rename"
    where, nodes, old = picked
    new = rng.choice(_STRINGS + [k for k in nodes])
    nodes[new] = nodes.pop(old)
    return doc, f"rename node {_show((*where, old))} to {new!r}"


def bad_share(doc, rng, sane):
    maps = _node_maps(doc)
    if not maps:
        return wrong_type(doc, rng, sane)
    picked = _pick_node(maps, rng)
    if picked is None:
        return doc, "nothing to share"
    where, nodes, node = picked
    value = rng.choice([node, *list(nodes), 3, ["x"], {"a": 1}, None, "", "nope", True])
    if isinstance(nodes[node], dict):
        params = nodes[node].setdefault("params", {})
        if isinstance(params, dict):
            params["share"] = value
    return doc, f"set {_show((*where, node, 'params', 'share'))} = {_short(value)}"


def group_cycle(doc, rng, sane):
    groups = doc.get("groups")
    if not isinstance(groups, dict) or not groups:
        groups = doc["groups"] = {"g": {"nodes": {}, "edges": [], "inputs": {},
                                        "outputs": {}}}
    a = rng.choice(list(groups))
    b = rng.choice(list(groups))
    body = groups[a]
    if not isinstance(body, dict) or not isinstance(body.get("nodes"), dict):
        return doc, "nothing to nest"
    inner = rng.choice(["loop", *body["nodes"]]) if body["nodes"] else "loop"
    body["nodes"][inner] = {"type": f"group.{b}", "params": {}}
    return doc, f"group {a!r}: node {inner!r} becomes group.{b}"


def group_bomb(doc, rng, sane):
    """Groups of groups: `width` instances of a group of `width` instances of ... (a file of
    a few lines that expands to width**depth nodes)."""
    width = rng.choice([2, 10] if sane else [2, 10, 100])
    depth = rng.choice([3, 6] if sane else [3, 6, 12])  # sane: what validates stays small
    groups = doc.get("groups") if isinstance(doc.get("groups"), dict) else {}
    for i in range(depth):
        groups[f"bomb{i}"] = {"nodes": {f"n{j}": {"type": f"group.bomb{i + 1}"}
                                        for j in range(width)}}
    groups[f"bomb{depth}"] = {"nodes": {"relu": {"type": "activations.ReLU"}},
                              "inputs": {"input": [["relu", "input"]]},
                              "outputs": {"output": ["relu", "output"]}}
    doc["groups"] = groups
    if isinstance(doc.get("nodes"), dict):
        doc["nodes"]["bomb"] = {"type": "group.bomb0"}
    return doc, f"add a group bomb {width}**{depth}"


def odd_group_name(doc, rng, sane):
    groups = doc.get("groups")
    if not isinstance(groups, dict) or not groups:
        return wrong_type(doc, rng, sane)
    old = rng.choice(list(groups))
    new = rng.choice(_STRINGS)
    groups[new] = groups.pop(old)
    for _, nodes in _node_maps(doc):
        for n in nodes.values():
            if isinstance(n, dict) and n.get("type") == f"group.{old}":
                n["type"] = f"group.{new}"
    return doc, f"rename group {old!r} to {new!r}"


def rewire(doc, rng, sane):
    edges = doc.get("edges")
    if not isinstance(edges, list) or not edges:
        return wrong_type(doc, rng, sane)
    i = rng.randrange(len(edges))
    nodes = list(doc["nodes"]) if isinstance(doc.get("nodes"), dict) else ["x"]
    end = rng.choice(["from", "to"])
    port = rng.choice(["input", "output", "x", "y", "loss", "nope", "target", "z"])
    new = [rng.choice(nodes), port]
    if isinstance(edges[i], dict):
        edges[i][end] = new
    return doc, f"set /edges/{i}/{end} = {_short(new)}"


def add_edge(doc, rng, sane):
    edges = doc.get("edges")
    nodes = list(doc["nodes"]) if isinstance(doc.get("nodes"), dict) else []
    if not isinstance(edges, list) or not nodes:
        return wrong_type(doc, rng, sane)
    ports = ["input", "output", "x", "y", "loss", "target"]
    edge = {"from": [rng.choice(nodes), rng.choice(ports)],
            "to": [rng.choice(nodes), rng.choice(ports)]}
    edges.append(edge)
    return doc, f"add edge {_short(edge)}"


def bad_tie(doc, rng, sane):
    nodes = list(doc["nodes"]) if isinstance(doc.get("nodes"), dict) else ["x"]
    names = ["weight", "bias", "embedding.weight", "nope", ""]
    tie = {"from": [rng.choice(nodes), rng.choice(names)],
           "to": [rng.choice(nodes), rng.choice(names)]}
    ties = doc.get("ties")
    if isinstance(ties, list):
        ties.append(tie)
    else:
        doc["ties"] = [tie]
    return doc, f"add tie {_short(tie)}"


def bad_stages(doc, rng, sane):
    training = doc.get("training")
    if not isinstance(training, dict):
        return wrong_type(doc, rng, sane)
    nodes = list(doc["nodes"]) if isinstance(doc.get("nodes"), dict) else []
    value = rng.choice([3, True, "x", [3], [{"epochs": 1, "frozen": True}],
                        [{"epochs": "1"}], [{"epochs": 1, "optimizers": 5}],
                        [{"epochs": 1, "frozen": [[1]]}], [{"epochs": 1, "optimizers": [{}]}],
                        [{"epochs": 1, "frozen": nodes[:1]}], [{"epochs": float("nan")}]])
    training["stages"] = value
    return doc, f"set /training/stages = {_short(value)}"


# -- value mutations -----------------------------------------------------------------------

def change_number(doc, rng, sane):
    paths = [p for p in _paths(doc) if isinstance(_get(doc, p), int | float)
             and not isinstance(_get(doc, p), bool)]
    if not paths:
        return wrong_type(doc, rng, sane)
    path = rng.choice(paths)
    v = _get(doc, path)
    limit = 10**4
    options = [0, -1, 1, -v, v + 1, v - 1, v * 2, float("nan"), float("inf"), str(v), None]
    if not sane:
        options += [v * 1000, 10**12, 2**31, 2**63]
    new = rng.choice(options)
    if sane and isinstance(new, int | float) and not isinstance(new, bool) and abs(new) > limit:
        new = limit if new > 0 else -limit
    return _set(doc, path, new), f"set {_show(path)} = {_short(new)} (was {_short(v)})"


def change_string(doc, rng, sane):
    paths = [p for p in _paths(doc) if isinstance(_get(doc, p), str)]
    if not paths:
        return wrong_type(doc, rng, sane)
    path = rng.choice(paths)
    v = _get(doc, path)
    new = rng.choice(_STRINGS + [v + "x", v[:-1], v.upper(), 1, None, [v], {v: v}])
    return _set(doc, path, new), f"set {_show(path)} = {_short(new)} (was {_short(v)})"


def change_list(doc, rng, sane):
    paths = [p for p in _paths(doc) if isinstance(_get(doc, p), list) and _get(doc, p)]
    if not paths:
        return wrong_type(doc, rng, sane)
    path = rng.choice(paths)
    v = _get(doc, path)
    new = rng.choice([[], v[:1], v + v[:1], v[::-1], [v], {"0": v[0]}])
    return _set(doc, path, new), f"set {_show(path)} = {_short(new)}"


STRUCTURAL: list[Callable] = [drop_key, wrong_type, swap_values, retype_node, retype_any,
                              rename_node, bad_share, group_cycle, group_bomb, odd_group_name,
                              rewire, add_edge, bad_tie, bad_stages]
VALUES: list[Callable] = [change_number, change_string, change_list, set_param]


# -- text mutations: (text, rng, sane) -> (text, description) -----------------------------

def bom(text, rng, sane):
    return "\ufeff" + text, "prepend a BOM"


def trailing(text, rng, sane):
    junk = rng.choice(["x", "}", "{}", "\x00", " // comment", "\n{\"format\": 1}"])
    return text + junk, f"append {junk!r}"


def truncate(text, rng, sane):
    n = rng.randrange(len(text))
    return text[:n], f"cut at {n} of {len(text)}"


def nest(text, rng, sane):
    depth = rng.choice([50, 500, 5000] if sane else [500, 5000, 100_000])
    doc = json.loads(text)
    doc.setdefault("ui", {})
    payload = "[" * depth + "]" * depth
    text = json.dumps(doc)
    key = rng.choice(["ui", "training", "nodes"])
    text = text.replace(f'"{key}": ', f'"{key}": {payload}, "{key}_was": ', 1)
    return text, f"{key} nested {depth} deep"


def literal(text, rng, sane):
    word = rng.choice(["NaN", "Infinity", "-Infinity", "1e999", "-0", "true"])
    import re

    numbers = list(re.finditer(r"(?<=[:\[, ])-?\d+(\.\d+)?(?=[,\]} \n])", text))
    if not numbers:
        return text, "no number to replace"
    m = rng.choice(numbers)
    return text[:m.start()] + word + text[m.end():], f"number at {m.start()} -> {word}"


TEXT: list[Callable] = [bom, trailing, truncate, nest, literal]


def mutate(text: str, rng: random.Random, sane: bool = False) -> tuple[str, list[str]]:
    """Apply one to three random mutations to a graph file's text; returns the new text and
    what was done, one line per mutation."""
    doc = json.loads(text)
    done: list[str] = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        if not isinstance(doc, dict):  # the root was replaced: nothing left to walk
            break
        kind = rng.random()
        if kind < 0.15:
            text = json.dumps(doc, allow_nan=True)
            try:
                text, what = rng.choice(TEXT)(text, rng, sane)
            except ValueError:  # a text damaged before cannot be nested into
                continue
            done.append(what)
            return text, done  # the text is no longer a document to mutate further
        pool = STRUCTURAL if kind < 0.6 else VALUES
        doc, what = rng.choice(pool)(doc, rng, sane)
        done.append(what)
    return json.dumps(doc, allow_nan=True), done


def case(seed: int, index: int, sane: bool = False) -> tuple[str, str, list[str]]:
    """Case `index` of a run with `seed`: (example name, mutated text, what was done).
    The same seed and index give the same case, in any process."""
    rng = random.Random(f"{seed}:{index}")
    path = rng.choice(EXAMPLES)
    text, done = mutate(path.read_text(encoding="utf-8"), rng, sane)
    return path.name, text, done
