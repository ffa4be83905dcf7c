"""The saved-model file (`.ngz`): a trained graph and its run in one file, and its reader.

A zip archive of exactly these members, nothing pickled:

    graph.json            the graph file (the format `nodegraph.save` writes)
    model.safetensors     weights keyed node.param, with the data blocks' normalisation
    state.safetensors     optimizer moments and the batch order's generator state
    run.json              history, final numbers, step count, optimizer hyper-parameters,
                          schedule states, and the format and version

The reader takes the file as hostile: it reads only those member names (another name, a
path, a duplicate, more members, or a member larger than `max_bytes` is refused before it is
unpacked), reads each member no further than its limit, parses the graph with the graph
file's own checks and the tensors with safetensors (no code runs), and names the file and
the member in every error. Weights are loaded through the same checks as a weights file
(`nodegraph.interop.export.weights.load_weights`). Estimators (trees, k-NN) are not tensors:
loading fits them again on the graph's train split, as the first run did.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from nodegraph.interop.export.weights import load_weights
from nodegraph.kinds.estimator import estimator_steps, fit_estimators
from nodegraph.model import allowlist, fileformat
from nodegraph.model.errors import NodegraphError, first_line
from nodegraph.model.outputs import OutputError, advice, reason
from nodegraph.runtime import checkpoint, generators
from nodegraph.runtime.train import compile_for, has_optimizer, training_options

FORMAT, VERSION = "nodegraph-model", 1
MEMBERS = ("graph.json", "model.safetensors", "state.safetensors", "run.json")
MAX_BYTES = 8 << 30  # what one member may unpack to, by default
MAX_JSON = 256 << 20  # run.json and graph.json


def write(path: Path, model: Any, compiled: Any) -> Path:
    """Write `model` (a `Model`) to `path`, whole or not at all: a temporary file renamed
    over it, so an old file at `path` stays when the write fails."""
    optimizers, tensors = {}, {}
    for o in compiled.optimizers:
        flat, meta = checkpoint._split_optimizer_state(o.node, o.optimizer.state_dict())
        tensors.update(flat)
        optimizers[o.node] = meta
    tensors.update(model.generators)
    run = {"format": FORMAT, "version": VERSION, "history": model.history,
           "final": model.final, "cancelled": model.cancelled,
           "stopped_early": model.stopped_early, "global_step": model.global_step,
           "optimizers": optimizers, "callbacks": _plain_states(path, model.callback_states),
           "schedules": {o.node: o.scheduler.state_dict() for o in compiled.optimizers
                         if o.scheduler is not None}}
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        blobs = {"graph.json": fileformat.dumps(model.graph).encode(),
                 "model.safetensors": save_tensors(_plain(model.weights())),
                 "state.safetensors": save_tensors(_plain(tensors)),
                 "run.json": json.dumps(run, indent=1, default=_number).encode()}
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
            for name in MEMBERS:
                zf.writestr(name, blobs[name])
        os.replace(tmp, path)
    except (OSError, SafetensorError) as e:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"cannot write the model file '{path}': {reason(e, path)}; "
                          f"{advice(e)} (nothing was written there)") from None
    return path


def read(path: Path, make: Any, *, trust: bool = False, device: str | None = None,
         max_bytes: int = MAX_BYTES) -> Any:
    """The model in `path`, built with `make(graph, compiled)`, or a NodegraphError saying
    what is wrong with the file."""
    blobs = _members(path, max_bytes)
    graph = fileformat.loads(_text(path, blobs, "graph.json"), source=f"{path}:graph.json")
    graph.folder = path.resolve().parent  # relative data paths start beside the file
    if trust:
        allowlist.trust(graph)
    run = _run_info(path, blobs)
    weights = _tensors(path, blobs, "model.safetensors")
    state = _tensors(path, blobs, "state.safetensors")
    opts = training_options(graph, device=device)
    if not has_optimizer(graph):
        opts = training_options(graph, device=device, epochs=0)
    compiled = compile_for(graph, opts, opts.device)
    if estimator_steps(compiled):
        fit_estimators(compiled)  # not tensors: fitted again, as the run fitted them
    load_weights(compiled, weights, f"{path}:model.safetensors")
    try:
        optimizers = {name: checkpoint._join_optimizer_state(name, meta, state)
                      for name, meta in run["optimizers"].items()}
        for o in compiled.optimizers:
            if o.node in optimizers:
                o.optimizer.load_state_dict(optimizers[o.node])
            if o.scheduler is not None and o.node in run["schedules"]:
                o.scheduler.load_state_dict(run["schedules"][o.node])
    except (KeyError, ValueError, TypeError, AttributeError, IndexError) as e:
        raise _bad(path, "run.json", f"its optimizer or schedule state does not fit the "
                   f"graph ({first_line(e)})") from None
    model = make(graph, compiled)
    model.history, model.final = run["history"], run["final"]
    model.cancelled, model.stopped_early = run["cancelled"], run["stopped_early"]
    model.global_step = run["global_step"]
    model.generators = generators.check(state, f"model file '{path}': member "
                                        "state.safetensors")
    model.callback_states = run.get("callbacks", {})
    return model


def _entry_count(path: Path) -> int | None:
    """The number of members the archive's end record declares, read before the central
    directory (a hostile file could list millions); None when it cannot be told."""
    try:
        with open(path, "rb") as f:
            end = zipfile._EndRecData(f)  # type: ignore[attr-defined]
    except (OSError, AttributeError, ValueError):
        return None
    return None if not end else int(end[zipfile._ECD_ENTRIES_TOTAL])  # type: ignore[attr-defined]


def _members(path: Path, max_bytes: int) -> dict[str, bytes]:
    """The archive's members by name, each checked before it is unpacked."""
    count = _entry_count(path) if path.is_file() else None
    if count is not None and count > 2 * len(MEMBERS):
        raise NodegraphError(f"model file '{path}' lists {count:,} members; a saved model "
                             f"has {len(MEMBERS)}, so it is not read")
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise NodegraphError(f"model file '{path}' does not exist") from None
    except IsADirectoryError:
        raise NodegraphError(f"model file '{path}' is a folder, not a saved model") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError):
        raise NodegraphError(f"model file '{path}' is not a saved model (not a zip archive, "
                             "or cut short); write one with model.save(path)") from None
    except OSError as e:
        raise NodegraphError(f"cannot read model file '{path}': {reason(e)}") from None
    with zf:
        infos = zf.infolist()
        names = [i.filename for i in infos]
        strange = [n for n in names if n not in MEMBERS]
        if strange or len(names) != len(set(names)):
            shown = ", ".join(repr(n)[:60] for n in strange[:3]) or "a member named twice"
            raise NodegraphError(f"model file '{path}' holds members a saved model does not "
                                 f"({shown}); it was not written by model.save, so it is "
                                 "not read")
        missing = [n for n in MEMBERS if n not in names]
        if missing:
            raise NodegraphError(f"model file '{path}' lacks {', '.join(missing)}; it is "
                                 "cut short or not a saved model")
        blobs = {}
        for info in infos:
            limit = MAX_JSON if info.filename.endswith(".json") else max_bytes
            if info.file_size > limit:
                raise _bad(path, info.filename, f"it unpacks to {info.file_size:,} bytes, "
                           f"more than the {limit:,} allowed (load_model(max_bytes=...) "
                           "raises the limit for weights)")
            try:
                with zf.open(info) as f:
                    data = f.read(limit + 1)
            except Exception as e:  # BadZipFile, a CRC error, zlib.error, an unknown method
                raise _bad(path, info.filename, f"it cannot be unpacked ({first_line(e)})"
                           ) from None
            if len(data) > limit:
                raise _bad(path, info.filename, "it unpacks to more than it declares")
            blobs[info.filename] = data
    return blobs


def _text(path: Path, blobs: dict[str, bytes], name: str) -> str:
    try:
        return blobs[name].decode("utf-8")
    except UnicodeDecodeError:
        raise _bad(path, name, "it is not UTF-8 text") from None


_RUN_FIELDS = {"history": list, "final": dict, "cancelled": bool, "stopped_early": bool,
               "global_step": int, "optimizers": dict, "schedules": dict}


def _run_info(path: Path, blobs: dict[str, bytes]) -> dict:
    try:
        run = json.loads(_text(path, blobs, "run.json"))
    except json.JSONDecodeError as e:
        raise _bad(path, "run.json", f"it is not valid JSON ({e.msg}, line {e.lineno})"
                   ) from None
    except RecursionError:
        raise _bad(path, "run.json", "it nests too deeply") from None
    if not isinstance(run, dict) or run.get("format") != FORMAT:
        raise _bad(path, "run.json", f"it does not say format '{FORMAT}'")
    if not isinstance(run.get("version"), int) or run["version"] > VERSION:
        raise _bad(path, "run.json", f"its version {run.get('version')!r} is newer than this "
                   f"nodegraph reads ({VERSION}); update nodegraph")
    for key, kind in _RUN_FIELDS.items():
        value = run.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise _bad(path, "run.json", f"'{key}' should be a JSON {kind.__name__}")
    if not all(isinstance(h, dict) for h in run["history"]):
        raise _bad(path, "run.json", "'history' should hold one object per epoch")
    return run


def _tensors(path: Path, blobs: dict[str, bytes], name: str) -> dict[str, torch.Tensor]:
    try:
        return load_tensors(blobs[name])
    except (SafetensorError, ValueError, TypeError, RuntimeError) as e:
        raise _bad(path, name, f"it is not a valid safetensors file ({first_line(e)})"
                   ) from None


def _bad(path: Path, member: str, problem: str) -> NodegraphError:
    return NodegraphError(f"model file '{path}': member {member} is damaged: {problem}")


def _plain_states(path: Path, states: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The callbacks' states, refused unless plain JSON (the file holds nothing else)."""
    for key, state in states.items():
        try:
            json.dumps(state, allow_nan=True)
        except (TypeError, ValueError) as e:
            raise NodegraphError(f"cannot save the model to '{path}': callback {key}'s "
                                 f"state_dict() must hold plain JSON values ({e})") from None
    return states


def _plain(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().contiguous().cpu() for k, v in tensors.items()}


def _number(value: Any) -> Any:
    """JSON for the numbers a history holds beside floats (0-d tensors, numpy scalars)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)

