"""A caller's own data for `fit` and `evaluate`: arrays, tensors, frames, torch datasets.

`nodegraph.fit(g, x=X, y=Y, validation_data=(Xv, Yv))` builds, for each data block the
arrays are for, the `Dataset` that block would have built from its files — the block's own
params split, scale (statistics of the training rows only) and batch it (`from_arrays`) —
and hands it to validation and the compile in place of the block's (`nodegraph.kinds.given`).
The graph is unchanged: the same file still runs from the CLI on its own data. A graph
with no data block of its own declares its inputs by shape with `data.Arrays` (as
`keras.Input` does).

What is accepted for `x` and `y`: a numpy array, a torch tensor, a pandas DataFrame or
Series (a table block's input and target columns picked by name), a list of numbers, or a
mapping "port" / "node.port" -> one of those for several inputs; for `x` alone, a torch
`Dataset` or `DataLoader` of (x, y) pairs or {"x": ..., "y": ...} dicts, read whole. Each
sample's shape and dtype is checked against what the block declares, by block, port and
both shapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from nodegraph.kinds.dataset import Dataset, files_relative_to, from_arrays, normalise
from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph
from nodegraph.model.spec import BlockSpec, Params

Arrays = dict[str, np.ndarray]  # port -> samples


@dataclass
class Block:
    """A data node of the graph and what its ports declare (None where its meta is not
    known without its files)."""

    node: str
    spec: BlockSpec
    params: Params
    ports: dict[str, tuple[tuple[int, ...], torch.dtype]] | None

    @property
    def name(self) -> str:
        return f"{self.spec.id} '{self.node}'"


def data_blocks(graph: Graph) -> list[Block]:
    """The graph's data nodes, with their declared port shapes where the meta tells them
    (read from headers at most, never the data)."""
    found = []
    registry = graph.registry
    for node in graph:
        if node.type not in registry or registry.get(node.type).kind != "data":
            continue
        spec = registry.get(node.type)
        params, bad = spec.resolve_params(node.params)
        if bad:
            raise NodegraphError(f"{spec.id} '{node.id}': " + "; ".join(
                f"{k}: {v}" for k, v in bad.items()))
        found.append(Block(node.id, spec, params, _declared(graph, spec, params)))
    return found


def _declared(graph: Graph, spec: BlockSpec, params: Params
              ) -> dict[str, tuple[tuple[int, ...], torch.dtype]] | None:
    if spec.meta is None:
        return None
    try:
        with files_relative_to(graph.folder):
            meta = spec.meta(params)
    except (NodegraphError, OSError, ValueError):
        return None  # a template graph's file may be absent: the arrays say the shapes
    return None if meta is None else dict(meta.ports)


def by_block(graph: Graph, blocks: Sequence[Block], x: Any, y: Any, what: str
             ) -> dict[str, Arrays]:
    """The caller's x and y as arrays per data node and port."""
    if not blocks:
        raise NodegraphError(f"{what}: the graph has no data block to take the arrays; add "
                             "a data.Arrays block (its x_shape declares one sample's shape, "
                             "like keras.Input) and wire its x and y")
    if _is_torch_data(x):
        if y is not None:
            raise NodegraphError(f"{what}: a torch Dataset or DataLoader brings its own "
                                 "targets; give no y")
        x, y = _read_torch(x, what)
    if x is None:
        raise NodegraphError(f"{what}: give the inputs, x=...")
    out: dict[str, Arrays] = {}
    for name, role in (("x", x), ("y", y)):
        if role is None:
            continue
        for (node, port), value in _keyed(blocks, role, name, what).items():
            block = next(b for b in blocks if b.node == node)
            out.setdefault(node, {})[port] = _array(block, port, value, what)
    for node, arrays in out.items():
        sizes = {p: len(a) for p, a in arrays.items()}
        if len(set(sizes.values())) > 1:
            raise NodegraphError(f"{what}: the arrays for '{node}' hold different numbers of "
                                 f"samples ({', '.join(f'{p}: {n}' for p, n in sizes.items())})")
    return out


def _keyed(blocks: Sequence[Block], value: Any, role: str, what: str
           ) -> dict[tuple[str, str], Any]:
    """(node, port) -> value: a mapping names its ports ("node.port", or the port when the
    graph has one data block); anything else is the one block's `role` port."""
    if isinstance(value, Mapping) and not _is_frame(value):
        out = {}
        for key, v in value.items():
            node, _, port = str(key).rpartition(".")
            if not node:
                if len(blocks) != 1:
                    raise NodegraphError(f"{what}: name the port as 'node.port' ({key!r}: "
                                         f"the graph has data blocks {_names(blocks)})")
                node = blocks[0].node
            block = next((b for b in blocks if b.node == node), None)
            if block is None:
                raise NodegraphError(f"{what}: {key!r} names no data block (the graph's: "
                                     f"{_names(blocks)})")
            ports = [p.name for p in block.spec.outputs]
            if port not in ports:
                raise NodegraphError(f"{what}: {block.name} has no port '{port}' (its "
                                     f"ports: {', '.join(ports)})")
            out[(node, port)] = v
        return out
    if len(blocks) != 1:
        raise NodegraphError(f"{what}: the graph has {len(blocks)} data blocks "
                             f"({_names(blocks)}); give {role} as a mapping "
                             "{'node.port': array, ...}")
    block = blocks[0]
    if role not in [p.name for p in block.spec.outputs]:
        raise NodegraphError(f"{what}: {block.name} has no port '{role}'; give a mapping "
                             "{'port': array, ...}")
    return {(block.node, role): value}


def _names(blocks: Sequence[Block]) -> str:
    return ", ".join(b.node for b in blocks)


def _is_frame(value: Any) -> bool:
    return type(value).__module__.startswith("pandas") and hasattr(value, "to_numpy")


def _is_torch_data(value: Any) -> bool:
    return isinstance(value, torch.utils.data.Dataset | torch.utils.data.DataLoader)


def _read_torch(data: Any, what: str) -> tuple[Any, Any]:
    """A torch Dataset or DataLoader read whole into x and y (each a tensor, or a dict of
    them when its samples are dicts)."""
    loader = data if isinstance(data, torch.utils.data.DataLoader) else \
        torch.utils.data.DataLoader(data, batch_size=256, shuffle=False)
    xs: list[Any] = []
    ys: list[Any] = []
    for batch in loader:
        if isinstance(batch, Mapping):
            xs.append({k: v for k, v in batch.items() if k != "y"})
            ys.append(batch.get("y"))
        elif isinstance(batch, Sequence) and len(batch) == 2:
            xs.append(batch[0])
            ys.append(batch[1])
        else:
            raise NodegraphError(f"{what}: a torch dataset's samples must be (x, y) pairs or "
                                 f"dicts of ports, got {type(batch).__name__}")
    if not xs:
        raise NodegraphError(f"{what}: the torch dataset holds no samples")
    if isinstance(xs[0], Mapping):
        x: Any = {k: torch.cat([torch.as_tensor(b[k]) for b in xs]) for k in xs[0]}
        x = x["x"] if set(x) == {"x"} else x
    else:
        x = torch.cat([torch.as_tensor(b) for b in xs])
    y = None if ys[0] is None else torch.cat([torch.as_tensor(b) for b in ys])
    return x, y


def _array(block: Block, port: str, value: Any, what: str) -> np.ndarray:
    """One port's samples as a numpy array in the block's convention (float inputs; class
    indices int64 (N,), values float32 (N, k)), checked against what the block declares."""
    where = f"{what}: {block.name} port '{port}'"
    a = _numbers(_columns(block, port, value), where)
    if a.ndim == 0:
        raise NodegraphError(f"{where}: needs one row per sample (a batch dimension first), "
                             "got a single number")
    declared = (block.ports or {}).get(port)
    if declared is None:  # no declaration to follow: the library's convention
        if port == "y" and a.dtype.kind in "biu":
            return a.astype(np.int64)
        return a.astype(np.float32).reshape(len(a), -1) if a.ndim == 1 else \
            a.astype(np.float32)
    shape, dtype = declared
    if dtype.is_floating_point:
        a = a.astype(np.float32)
    else:
        if a.dtype.kind == "f" and not np.all(np.isfinite(a) & (a == np.round(a))):
            raise NodegraphError(f"{where}: takes whole numbers ({dtype}: class indices), "
                                 f"got fractions ({a.dtype})")
        a = a.astype(np.int64)
    if tuple(a.shape[1:]) != tuple(shape) and a.size == len(a) * int(np.prod(shape, dtype=int)) \
            and (a.ndim == 1 or shape == ()):  # (N,) for (N, 1) or (N, 1) for (N,)
        a = a.reshape(len(a), *shape)
    if tuple(a.shape[1:]) != tuple(shape):
        raise NodegraphError(f"{where}: the graph takes samples shaped {_shape(shape)}, got "
                             f"{_shape(a.shape[1:])} (the array is {_shape(a.shape)})")
    return a


def _columns(block: Block, port: str, value: Any) -> Any:
    """A frame's columns for `port`, by name: the block's `inputs` (x) or `targets` (y)
    params where it names them and the frame has them all, else every column."""
    if not _is_frame(value) or not hasattr(value, "columns"):
        return value.to_numpy() if _is_frame(value) else value
    names = block.params.get({"x": "inputs", "y": "targets"}.get(port, ""), None)
    if names and all(str(n) in map(str, value.columns) for n in names):
        return value[[str(n) for n in names]].to_numpy()
    return value.to_numpy()


def _numbers(value: Any, where: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    try:
        a = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise NodegraphError(f"{where}: not an array of numbers ({e})") from None
    if a.dtype.kind not in "biuf":
        raise NodegraphError(f"{where}: takes numbers, got {a.dtype} values")
    return a


def _shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(int(d)) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def datasets(blocks: Sequence[Block], train: dict[str, Arrays],
             val: dict[str, Arrays] | None = None,
             stats: Mapping[str, Mapping[str, Mapping[str, torch.Tensor]]] | None = None,
             split: str | None = None) -> dict[str, Dataset]:
    """Per data node, the dataset of the caller's arrays, built by the block's own params:
    its split (or `val` as the validation split), scaling fitted on the training rows (or
    `stats`, a trained model's, to score new data as it was trained), batch size and
    shuffling. `split` puts every row in that one split (evaluate)."""
    out = {}
    for node, arrays in train.items():
        block = next(b for b in blocks if b.node == node)
        missing = [p.name for p in block.spec.outputs if p.name not in arrays
                   and (p.name != "y" or split is None or p.name in (block.ports or {}))]
        if missing:
            raise NodegraphError(f"{block.name} needs arrays for its port(s) "
                                 f"{', '.join(missing)} (give x= and y=)")
        more = (val or {}).get(node)
        n = len(next(iter(arrays.values())))
        given: dict[str, np.ndarray] | None = None
        if split is not None:
            given = {s: np.arange(n) if s == split else np.arange(0) for s in
                     ("train", "val", "test")}
        elif more is not None:
            if set(more) != set(arrays):
                raise NodegraphError(f"validation_data for {block.name} gives ports "
                                     f"{sorted(more)}, the training data {sorted(arrays)}")
            m = len(next(iter(more.values())))
            arrays = {p: np.concatenate([a, more[p]]) for p, a in arrays.items()}
            given = {"train": np.arange(n), "val": np.arange(n, n + m),
                     "test": np.arange(0)}
        kept = None if stats is None else stats.get(node)
        if kept is None:
            out[node] = from_arrays(arrays, block.params, given_splits=given)
        else:  # scaled with the trained model's statistics, not refitted
            plain = dict(block.params, normalize="none")
            scaled = normalise(arrays, np.arange(0), "none", (), {
                port: {k: v.numpy() for k, v in st.items()} for port, st in kept.items()})
            ds = from_arrays(scaled, plain, given_splits=given)
            ds.normalization = {port: dict(st) for port, st in kept.items()}
            out[node] = ds
    return out
