"""The saved-model file (`.ngz`): a trained graph and its run in one file, and its reader.

A zip archive of exactly these members, nothing pickled:

    graph.json            the graph file (the format `nodegraph.save` writes)
    model.safetensors     weights keyed node.param, with the data blocks' normalisation
    state.safetensors     optimizer moments and every random generator's state
                          (`nodegraph.runtime.generators`: torch CPU and CUDA, numpy,
                          Python, the batch order, from which the samplers and the
                          DataLoader workers' seeds are drawn)
    run.json              history, final numbers, step count, optimizer hyper-parameters,
                          schedule states, the callbacks' state_dicts, format and version

A model is always saved at the end of a whole epoch (a stop mid-epoch goes back to one:
`nodegraph.runtime.epoch_start`), so what it holds continues exactly: `load_model(p).fit(
epochs=k)` in a new process equals one run of `n + k` epochs, bit for bit on the CPU.

The reader takes the file as hostile (`modelfile_archive`, `modelfile_run`), in this
order, each refusal a NodegraphError naming the file and the member: the path must open,
without blocking, as a regular file (not a FIFO, not a link to a device), which `zipfile`
then reads; the archive lists only these member names, once each; graph.json and run.json
are read in chunks to the graph file's limit (10 MB), and stop there; the graph is parsed
with the graph file's own checks and run.json is type-checked field by field (history
numbered and bounded, counts bounded, the optimizers' hyper-parameters and the schedules'
states of the kinds the compiled graph's own have); then each safetensors header is read
and every tensor held to the graph (a weight's shape and dtype, an optimizer state no
larger than its parameters, a generator state of its size), which bounds the data before a
byte of it is read. Weights are loaded through the same checks as a weights file
(`nodegraph.interop.export.weights.load_weights`). Estimators (trees, k-NN) are not tensors:
loading fits them again on the graph's train split, as the first run did.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import save as save_tensors

from nodegraph.interop import modelfile_archive as archive
from nodegraph.interop import modelfile_run
from nodegraph.kinds.estimator import estimator_steps, fit_estimators
from nodegraph.model import allowlist, dangerous, fileformat
from nodegraph.model.errors import NodegraphError, ValidationError, first_line
from nodegraph.model.outputs import OutputError, advice, reason
from nodegraph.runtime import checkpoint, generators, normalization
from nodegraph.runtime.train import compile_for, has_optimizer, training_options

FORMAT, VERSION = "nodegraph-model", 1
MEMBERS = ("graph.json", "model.safetensors", "state.safetensors", "run.json")
MAX_BYTES = 8 << 30  # what one tensor member may unpack to, at most (its header bounds it)
MAX_JSON = fileformat.MAX_BYTES  # run.json and graph.json: a graph file's limit, 10 MB
MAX_DIRECTORY = 1 << 20  # the archive's central directory (names, sizes, comments)


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


def read(path: Path, make: Any, *, trust: bool = False, grant: Any = (),
         device: str | None = None, max_bytes: int = MAX_BYTES) -> Any:
    """The model in `path`, built with `make(graph, compiled)`, or a NodegraphError saying
    what is wrong with the file (see the module doc for what is checked, and in what order).
    `trust` and `grant` are the CLI's --trust and --grant (`_trust`)."""
    with archive.open_regular(path) as f:
        zf = _archive(path, f)
        with zf:
            infos = {i.filename: i for i in zf.infolist()}
            graph_text = _json_member(path, zf, infos["graph.json"])
            run_text = _json_member(path, zf, infos["run.json"])
            graph = fileformat.loads(graph_text, source=f"{path}:graph.json")
            graph.folder = path.resolve().parent  # relative data paths start beside the file
            run = _run_info(path, run_text)
            if trust or grant:
                _trust(path, graph, grant, trust)
            try:  # its settings too (a seed of the wrong type): the file named in the error
                opts = training_options(graph, device=device)
                if not has_optimizer(graph):
                    opts = training_options(graph, device=device, epochs=0)
                compiled = compile_for(graph, opts, opts.device)
            except ValidationError as e:  # the file named, as every other refusal names it
                raise NodegraphError(f"model file '{path}': its graph.json {e}") from None
            if estimator_steps(compiled):  # before the weights are held to the module's
                fit_estimators(compiled)  # not tensors: fitted again, as the run fitted them
            optimizers = {o.node: o.optimizer.state_dict() for o in compiled.optimizers}
            modelfile_run.check_optimizers(path, run["optimizers"], optimizers)
            modelfile_run.check_schedules(path, run["schedules"], {
                o.node: o.scheduler.state_dict() for o in compiled.optimizers
                if o.scheduler is not None})
            weights = archive.read_tensors(path, zf, infos["model.safetensors"],
                                           _weight_spec(compiled), max_bytes)
            state = archive.read_tensors(path, zf, infos["state.safetensors"],
                                         _state_spec(compiled), max_bytes)
    from nodegraph.interop.export.weights import load_weights  # not at import: the exports

    load_weights(compiled, weights, f"{path}:model.safetensors")
    try:
        saved = {name: checkpoint._join_optimizer_state(name, meta, state)
                 for name, meta in run["optimizers"].items()}
        for o in compiled.optimizers:
            if o.node in saved:
                o.optimizer.load_state_dict(saved[o.node])
            if o.scheduler is not None and o.node in run["schedules"]:
                o.scheduler.load_state_dict(run["schedules"][o.node])
    except (KeyError, ValueError, TypeError, AttributeError, IndexError, RuntimeError) as e:
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


def _trust(path: Path, graph: Any, grant: Any, modules: bool) -> None:
    """Trust `graph` as ``--trust`` (`modules`) and ``--grant`` do; a callable that does more
    than compute (`nodegraph.model.dangerous`) and is not in `grant` is refused here, all of
    them named at once with what each can do and how to grant it."""
    allowlist.trust(graph, grant, modules=modules)
    needed = {name: powers for name, powers in allowlist.powerful(allowlist.granted(graph)
                                                                  ).items()
              if name not in graph.trusted and allowlist.module_of(name) in graph.trusted}
    if needed:
        said = "; ".join(f"{name} (it {dangerous.describe(p)})" for name, p in needed.items())
        raise NodegraphError(
            f"model file '{path}': its graph calls {said}; trust=True does not grant "
            f"{'this' if len(needed) == 1 else 'these'}: if you trust the file to do that, "
            f"pass grant={sorted(needed)!r} to load_model (as --grant on the command line)")


def _archive(path: Path, f: Any) -> zipfile.ZipFile:
    """The zip archive on the open file `f`, its member list checked before any is read."""
    try:
        end = zipfile._EndRecData(f)  # type: ignore[attr-defined]
    except (OSError, ValueError):
        end = None
    if not end:
        raise NodegraphError(f"model file '{path}' is not a saved model (not a zip archive, "
                             "or cut short); write one with model.save(path)")
    count = int(end[zipfile._ECD_ENTRIES_TOTAL])  # type: ignore[attr-defined]
    if count > 2 * len(MEMBERS):  # before the central directory: it could list millions
        raise NodegraphError(f"model file '{path}' lists {count:,} members; a saved model "
                             f"has {len(MEMBERS)}, so it is not read")
    directory = int(end[zipfile._ECD_SIZE])  # type: ignore[attr-defined]
    if directory > MAX_DIRECTORY:  # zipfile reads it whole
        raise NodegraphError(f"model file '{path}' declares a member list of {directory:,} "
                             f"bytes (a saved model's is a few hundred), so it is not read")
    try:
        zf = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError):
        raise NodegraphError(f"model file '{path}' is not a saved model (not a zip archive, "
                             "or cut short); write one with model.save(path)") from None
    except NotImplementedError as e:  # a member list naming a zip version or method unknown
        raise NodegraphError(f"model file '{path}' is not a saved model ({e}); write one "
                             "with model.save(path)") from None
    except OSError as e:
        raise NodegraphError(f"cannot read model file '{path}': {reason(e)}") from None
    names = [i.filename for i in zf.infolist()]
    strange = [n for n in names if n not in MEMBERS]
    if strange or len(names) != len(set(names)):
        zf.close()
        shown = ", ".join(repr(n)[:60] for n in strange[:3]) or "a member named twice"
        raise NodegraphError(f"model file '{path}' holds members a saved model does not "
                             f"({shown}); it was not written by model.save, so it is "
                             "not read")
    missing = [n for n in MEMBERS if n not in names]
    if missing:
        zf.close()
        raise NodegraphError(f"model file '{path}' lacks {', '.join(missing)}; it is "
                             "cut short or not a saved model")
    return zf


def _json_member(path: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> str:
    data = archive.read_member(path, zf, info, MAX_JSON, "the limit of a graph file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad(path, info.filename, "it is not UTF-8 text") from None


def _run_info(path: Path, text: str) -> dict:
    containers = text.count("{") + text.count("[")  # counted at C speed, before parsing
    if containers > modelfile_run.MAX_CONTAINERS:
        raise _bad(path, "run.json", f"it holds {containers:,} objects and arrays; at most "
                   f"{modelfile_run.MAX_CONTAINERS:,} (a run's history is far smaller)")
    try:
        run = json.loads(text)
    except json.JSONDecodeError as e:
        raise _bad(path, "run.json", f"it is not valid JSON ({e.msg}, line {e.lineno})"
                   ) from None
    except RecursionError:
        raise _bad(path, "run.json", "it nests too deeply") from None
    return modelfile_run.check_run(path, run, FORMAT, VERSION)


def _weight_spec(compiled: Any) -> Callable[[str], archive.TensorSpec | str]:
    """What model.safetensors may hold: the compiled graph's weights and its data blocks'
    normalisation, each of its shape and a float or its own dtype."""
    every = {k.removeprefix("blocks."): v for k, v in compiled.module.state_dict().items()}
    every.update(normalization.state(compiled))
    data_blocks = set(compiled.datasets)
    most = max([1 << 20, *(v.numel() for v in every.values())])

    def spec(name: str) -> archive.TensorSpec | str:
        t = every.get(name)
        if t is not None:
            kind = _DTYPE_NAMES.get(t.dtype)
            dtypes = FLOATS if t.is_floating_point() else ((kind,) if kind else None)
            return archive.TensorSpec(dtypes, tuple(t.shape))
        node = name.removeprefix(normalization.PREFIX).partition("/")[0]
        if name.startswith(normalization.PREFIX) and node in data_blocks:
            return archive.TensorSpec(FLOATS, None, most)  # fitted by the run, not yet here
        return "is no weight of this graph"
    return spec


def _state_spec(compiled: Any) -> Callable[[str], archive.TensorSpec | str]:
    """What state.safetensors may hold: the generators' states, and optimizer state for a
    parameter of an optimizer of the graph, no larger than all that optimizer's parameters
    (L-BFGS keeps flat vectors of them all)."""
    sizes = {o.node: sum(p.numel() for p in o.params) for o in compiled.optimizers}
    counts = {o.node: sum(len(g["params"]) for g in o.optimizer.param_groups)
              for o in compiled.optimizers}

    def spec(name: str) -> archive.TensorSpec | str:
        if name.startswith("rng/"):
            want = generators.expected(name)
            if want is None:
                return "is no generator's state"
            return archive.TensorSpec((_DTYPE_NAMES[want[0]],), (want[1],))
        parts = name.split("/")
        if len(parts) != 4 or parts[0] != "optim" or parts[1] not in sizes:
            return "is neither a generator's state nor an optimizer's of this graph"
        if not parts[2].isdigit() or int(parts[2]) >= counts[parts[1]]:
            return f"is for no parameter of optimizer '{parts[1]}'"
        return archive.TensorSpec(None, None, max(1, sizes[parts[1]]))
    return spec


FLOATS = ("F32", "F64", "F16", "BF16")
_DTYPE_NAMES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16",
                torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32",
                torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}


def _bad(path: Path, member: str, problem: str) -> NodegraphError:
    return archive.damaged(path, member, problem)


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

