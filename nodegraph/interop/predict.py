"""Predictions over whole splits or a user's arrays, in batches: `Model.predict`.

`nodegraph.forward` runs one batch; this runs as many as the data needs through it, with
the compiled graph's trained weights, and joins the outputs along the batch dimension. By
default it returns the prediction heads (`nodegraph.interop.export.model.partition`: the
outputs losses and metrics read), which is what a caller of `predict` means; a split's
batches come from the data blocks already scaled, a user's arrays are raw and go through
the model's preprocessing (`nodegraph.runtime.preprocess`): scaled as the data block scaled
its own, and for an image block photo files or decoded photos read as it reads its files,
then the deterministic part of its augment chain; a table block takes rows by column name
(a pandas DataFrame, a pyarrow Table, a mapping column -> values), its input columns picked
and its text columns coded as it coded its files (`table_rows` gives that array).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nodegraph.interop.export.model import partition
from nodegraph.kinds.rawinput import is_texts
from nodegraph.model.errors import NodegraphError
from nodegraph.runtime import feeding, preprocess
from nodegraph.runtime.compile import Compiled, Key
from nodegraph.runtime.forward import forward

SPLITS = ("train", "val", "test")


def predict(c: Compiled, data: Any, batch_size: int,
            outputs: str | Iterable[str] | None = None) -> Any:
    """See `nodegraph.interop.model.Model.predict`."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise NodegraphError(f"batch_size={batch_size!r}: give a whole number of samples >= 1")
    wanted = _outputs(c, outputs)
    split = isinstance(data, str) and (data in SPLITS or not (_reads_photos(c)
                                                              or _reads_texts(c)))
    if split and feeding.any_streamed(c.datasets):
        inputs: dict[Key, torch.Tensor] = {}
        batches, raw = _streamed_split(c, data, batch_size), False
    else:
        if split:
            inputs, raw = _split(c, data), False
        else:
            inputs, raw = _user_inputs(c, data), True
        n = _length(inputs)
        batches = ({k: v[i:i + batch_size] for k, v in inputs.items()}
                   for i in range(0, n, batch_size))
    pieces: dict[Key, list[torch.Tensor]] = {k: [] for k in wanted}
    graph = c.exec_graph or c.graph
    nodes = {node for node, _ in wanted}
    for batch in batches:
        values = forward(graph, batch, compiled=c, nodes=nodes, raw=raw)
        for key in wanted:
            if key not in values:
                raise NodegraphError(f"output {key[0]}.{key[1]} could not be computed from "
                                     f"the inputs given ({', '.join(_names(batch))}); give "
                                     "the data ports it reads")
            pieces[key].append(values[key].detach().cpu())
    joined = {f"{k[0]}.{k[1]}": (torch.cat(v) if v else torch.empty(0))
              for k, v in pieces.items()}
    return next(iter(joined.values())) if len(joined) == 1 else joined


def _outputs(c: Compiled, outputs: str | Iterable[str] | None) -> list[Key]:
    """The (node, port) values to return: the named ones, or the prediction heads."""
    if outputs is None:
        heads = partition(c).heads
        if not heads:
            raise NodegraphError("the graph has no prediction output to return; name one "
                                 "with outputs='node.port'")
        return heads
    names = [outputs] if isinstance(outputs, str) else list(outputs)
    specs = c.report.specs
    keys = []
    for name in names:
        node, _, port = str(name).partition(".")
        spec = specs.get(node)
        if spec is None:
            raise NodegraphError(f"outputs: the graph has no node '{node}'")
        ports = [p.name for p in spec.outputs]
        port = port or (ports[0] if ports else "")
        if port not in ports:
            raise NodegraphError(f"outputs: '{node}' has no output '{port}' (its outputs: "
                                 f"{', '.join(ports) or 'none'})")
        keys.append((node, port))
    return keys


def _split(c: Compiled, split: str) -> dict[Key, torch.Tensor]:
    if split not in SPLITS:
        raise NodegraphError(f"split '{split}': use one of {', '.join(SPLITS)}, or give "
                             "arrays")
    found = {(node, port): t for node, ds in c.datasets.items() if ds.has(split)
             for port, t in ds.tensors(split).items()}
    if not found:
        raise NodegraphError(f"the graph's data has no '{split}' split")
    return found


def _streamed_split(c: Compiled, split: str, size: int) -> Iterator[dict[Key, torch.Tensor]]:
    """A split's batches when some data streams: read by the DataLoader workers as
    evaluation reads them (in at most the training batch size), without random
    augmentation, the training split too."""
    if split not in SPLITS:
        raise NodegraphError(f"split '{split}': use one of {', '.join(SPLITS)}, or give "
                             "arrays")
    if not any(ds.has(split) for ds in c.datasets.values()):
        raise NodegraphError(f"the graph's data has no '{split}' split")
    return feeding.eval_batches(c.datasets, split, size, plain=True)


def table_rows(c: Compiled, data: Any, port: str | None = None) -> np.ndarray:
    """The float32 (N, columns) array a table block's port takes raw — what the ONNX file
    takes as its input, and `Model.predict` as an array — from rows by column name (a
    pandas DataFrame, a pyarrow Table, a mapping column -> values): the block's input
    columns in its order (others, such as the targets, ignored), numbers as they are, text
    as the codes the block gave its files' values. `port` ("node.port", or the node) picks
    the table port when the graph has several."""
    every = [(n, p) for n, ds in c.datasets.items()
             for p in ds.ports if preprocess.table_input(c, (n, p)) is not None]
    tables = every
    if port is not None:
        node, _, name = port.partition(".")
        tables = [k for k in tables if k[0] == node and (not name or k[1] == name)]
    if len(tables) != 1:
        found = ", ".join(f"{n}.{p}" for n, p in every) or "none"
        what = f"'{port}' names no" if port is not None else f"{len(tables)} table ports, not"
        raise NodegraphError(f"table_rows: {what} one table data port (the graph's table "
                             f"ports: {found}); name one with port='node.port'")
    key = tables[0]
    table = preprocess.table_input(c, key)
    assert table is not None
    if not preprocess.is_rows(data):
        raise NodegraphError(f"input {key[0]}.{key[1]}: give rows by column name (a pandas "
                             "DataFrame, a pyarrow Table or a mapping column -> values)")
    return table.array(data, f"{key[0]}.{key[1]}")


def _user_inputs(c: Compiled, data: Any) -> dict[Key, torch.Tensor]:
    """The caller's arrays keyed (node, port): a mapping, or one array (or table rows by
    column name) for the one data port the prediction reads."""
    if isinstance(data, Mapping) and not _columns(c, data):
        out = {}
        for key, value in data.items():
            node, _, port = str(key).rpartition(".") if isinstance(key, str) else key
            if not node and len(c.datasets) == 1:  # a port of the one data block
                node = next(iter(c.datasets))
            if not node:
                raise NodegraphError(f"input {key!r}: name it 'node.port', e.g. 'data.x'")
            out[(node, port)] = _value(c, (node, port), value)
        return out
    ports = partition(c).predict_inputs
    if is_texts(data) and _reads_texts(c):
        return _texts(c, ports, data)
    if len(ports) != 1:
        names = ", ".join(f"{n}.{p}" for n, p in ports) or "none"
        raise NodegraphError(f"the prediction reads {len(ports)} data ports ({names}); give "
                             "a mapping {'node.port': array, ...}")
    return {ports[0]: _value(c, ports[0], data)}


def _columns(c: Compiled, data: Mapping) -> bool:
    """Whether a mapping holds a table's columns rather than node.port inputs: the
    prediction reads one table port and no key names a node of the graph."""
    ports = partition(c).predict_inputs
    if len(ports) != 1 or preprocess.table_input(c, ports[0]) is None:
        return False
    graph = c.exec_graph or c.graph
    return all(isinstance(k, str) and k.rpartition(".")[0] not in graph for k in data)


def _reads_texts(c: Compiled) -> bool:
    return any(preprocess.text_input(c, k) is not None for k in partition(c).predict_inputs)


def _texts(c: Compiled, ports: list[Key], texts: Any) -> dict[Key, torch.Tensor]:
    """Texts as every port the prediction reads: a text block's token ids and mask, each
    tokenized as the block tokenized its table."""
    steps = {k: preprocess.text_input(c, k) for k in ports}
    other = [f"{n}.{p}" for (n, p), step in steps.items() if step is None]
    if other:
        raise NodegraphError(f"the prediction also reads {', '.join(other)}, which texts do "
                             "not give; pass a mapping {'node.port': values, ...}")
    return {k: torch.from_numpy(step.array(texts, f"{k[0]}.{k[1]}"))
            for k, step in steps.items() if step is not None}


def _reads_photos(c: Compiled) -> bool:
    return any(preprocess.image_input(c, k) is not None for k in partition(c).predict_inputs)


def _value(c: Compiled, key: Key, value: Any) -> torch.Tensor:
    """One port's raw input as a tensor: photos (paths, decoded uint8 arrays) read as the
    data block reads its files, when the port is an image block's."""
    name = f"{key[0]}.{key[1]}"
    text = preprocess.text_input(c, key)
    if text is not None and is_texts(value):
        return torch.from_numpy(text.array(value, name))
    image = preprocess.image_input(c, key)
    if image is not None and preprocess.is_photos(value):
        return preprocess.read_photos(image, value, name)
    if isinstance(value, str | Path):
        raise NodegraphError(f"input {name}: '{value}' is a file, but '{key[0]}' reads no "
                             "images; give an array of raw values")
    if isinstance(value, torch.utils.data.Dataset | torch.utils.data.DataLoader):
        value = _torch_inputs(value, name)
    if _is_frame(value) and preprocess.table_input(c, key) is None:
        value = np.array(value.to_numpy())  # a table block picks its columns by name itself
    t = _tensor(preprocess.table_array(c, key, value), name)
    return t if image is not None else _checked(c, key, t)


def _checked(c: Compiled, key: Key, t: torch.Tensor) -> torch.Tensor:
    """`t` if its samples have the shape the data block's port gives the model ((N,) read
    as (N, 1) where that is it), else an error naming the block, the port, both shapes."""
    meta = c.report.outputs.get(key)
    if meta is None or t.ndim == 0:
        return t
    want = tuple(meta.shape[1:])
    if tuple(t.shape[1:]) != want and t.ndim == 1 and want == (1,):
        t = t.reshape(-1, 1)
    if tuple(t.shape[1:]) != want:
        spec = c.report.specs.get(key[0])
        block = f"{spec.id} '{key[0]}'" if spec is not None else f"'{key[0]}'"
        raise NodegraphError(f"predict: {block} port '{key[1]}': the model takes samples "
                             f"shaped {_shape(want)}, got {_shape(t.shape[1:])} (the array "
                             f"is {_shape(t.shape)})")
    return t


def _shape(shape: Any) -> str:
    dims = [str(int(d)) for d in shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _is_frame(value: Any) -> bool:
    return type(value).__module__.startswith("pandas") and hasattr(value, "to_numpy")


def _torch_inputs(data: Any, name: str) -> torch.Tensor:
    """A torch Dataset's or DataLoader's inputs, read whole: the first item of each
    sample (x of (x, y)), or the sample itself."""
    loader = data if isinstance(data, torch.utils.data.DataLoader) else \
        torch.utils.data.DataLoader(data, batch_size=256, shuffle=False)
    parts = []
    for batch in loader:
        if isinstance(batch, Mapping):
            batch = batch.get("x", batch.get(name.rpartition(".")[2]))
        elif isinstance(batch, list | tuple):
            batch = batch[0]
        if not isinstance(batch, torch.Tensor):
            raise NodegraphError(f"input {name}: a torch dataset's samples must be x, (x, y) "
                                 "or {'x': ...}")
        parts.append(batch)
    if not parts:
        raise NodegraphError(f"input {name}: the torch dataset holds no samples")
    return torch.cat(parts)


def _tensor(value: Any, name: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    try:
        return torch.as_tensor(np.asarray(value))
    except (TypeError, ValueError) as e:
        raise NodegraphError(f"input {name}: not an array of numbers ({e})") from None


def _length(inputs: Mapping[Key, torch.Tensor]) -> int:
    sizes = {k: (int(v.shape[0]) if v.ndim else 0) for k, v in inputs.items()}
    if not sizes or min(sizes.values()) == 0:
        raise NodegraphError("nothing to predict: the inputs hold no samples (an array "
                             "needs a batch dimension first)")
    if len(set(sizes.values())) > 1:
        shown = ", ".join(f"{n}.{p}: {s}" for (n, p), s in sizes.items())
        raise NodegraphError(f"the inputs hold different numbers of samples ({shown})")
    return next(iter(sizes.values()))


def _names(inputs: Mapping[Key, Any]) -> list[str]:
    return [f"{n}.{p}" for n, p in inputs]
