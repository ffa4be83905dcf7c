"""Checkpoints as safetensors plus a small JSON, written so a crash never loses the last one.

A checkpoint is a folder `last/` inside the run's checkpoint directory:
``model.safetensors`` (weights keyed `node.param`, and each data block's fitted
normalisation under ``normalization/NODE/PORT.centre|scale``, which weight loaders skip:
see `nodegraph.runtime.normalization`), ``state.safetensors`` (optimizer
moments and random-number-generator states) and ``trainer.json`` (epoch, history,
early-stopping counters, schedule states, optimizer hyper-parameters). It is written to a
temporary folder first and swapped in with renames, so at any instant there is one complete
checkpoint on disk. Nothing is pickled.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from nodegraph.model.errors import NodegraphError
from nodegraph.model.outputs import OutputError, advice, reason
from nodegraph.model.safe_read import require_regular

LAST = "last"


def save(directory: Path, weights: dict[str, torch.Tensor],
         optimizers: dict[str, dict], tensors: dict[str, torch.Tensor], info: dict) -> Path:
    """Write a complete checkpoint and make it `last`, replacing the previous one; when
    the write fails, the previous one stays and no temporary folder is left."""
    tmp, final, old = directory / f".{LAST}.tmp", directory / LAST, directory / f".{LAST}.old"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        state, opt_json = dict(tensors), {}
        for name, sd in optimizers.items():
            flat, meta = _split_optimizer_state(name, sd)
            state.update(flat)
            opt_json[name] = meta
        save_file(_contiguous(weights), str(tmp / "model.safetensors"))
        save_file(_contiguous(state), str(tmp / "state.safetensors"))
        (tmp / "trainer.json").write_text(json.dumps({**info, "optimizers": opt_json},
                                                     indent=1))
        _put_back(final, old)  # a crash mid-swap left the last good one as .old
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
        return final
    except (OSError, SafetensorError) as e:
        with contextlib.suppress(OSError):  # best effort; load reads .old as well
            _put_back(final, old)
        raise OutputError(f"cannot write the checkpoint in '{directory}': "
                          f"{reason(e, directory)}; {advice(e)}; the previous checkpoint, if "
                          "any, is kept (continue from it with --resume)") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _put_back(final: Path, old: Path) -> None:
    """Make the previous checkpoint `last` again when a swap stopped halfway."""
    if not final.exists() and old.exists():
        old.rename(final)


def load(directory: Path) -> tuple[dict[str, torch.Tensor], dict[str, dict],
                                   dict[str, torch.Tensor], dict]:
    """Read `last` (or the previous one a crash left mid-swap): weights, optimizer state
    dicts by node, other tensors, and the trainer info. A damaged file is named."""
    folder = directory / LAST
    if not folder.exists() and (directory / f".{LAST}.old").exists():
        folder = directory / f".{LAST}.old"
    if not (folder / "trainer.json").exists():
        raise NodegraphError(f"no checkpoint to resume from in {directory}")
    info = _read_info(folder / "trainer.json")
    weights = read_tensors(folder / "model.safetensors", "checkpoint file", _DAMAGED)
    state = read_tensors(folder / "state.safetensors", "checkpoint file", _DAMAGED)
    for key in ("rng/torch", "rng/shuffle"):
        if key not in state or state[key].dtype != torch.uint8:
            raise _damaged(folder / "state.safetensors", f"it has no random-number state "
                           f"'{key}'")
    try:
        optimizers = {name: _join_optimizer_state(name, meta, state)
                      for name, meta in info.pop("optimizers", {}).items()}
    except (KeyError, ValueError, TypeError, AttributeError) as e:
        raise _damaged(folder / "trainer.json", f"its optimizer state is malformed ({e!r})") \
            from None
    others = {k: v for k, v in state.items() if not k.startswith("optim/")}
    return weights, optimizers, others, info


def written_epoch(directory: str | Path) -> int | None:
    """The epoch of the checkpoint in `directory`, or None when there is none (or it cannot
    be read): what a message may claim about it."""
    folder = Path(directory) / LAST
    if not folder.exists():
        folder = Path(directory) / f".{LAST}.old"
    try:
        info = json.loads((folder / "trainer.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    epoch = info.get("epoch") if isinstance(info, dict) else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None


def read_tensors(path: Path, what: str, advice: str) -> dict[str, torch.Tensor]:
    """A safetensors file, or an error naming it as `what`, saying what is wrong with it
    and then `advice`."""
    path = Path(path)
    if path.is_dir():
        raise NodegraphError(f"{what} '{path}' is a folder, not a safetensors file; {advice}")
    try:
        require_regular(path, what)  # not a FIFO or device, which safetensors would wait on
        return load_file(str(path))
    except FileNotFoundError:
        raise NodegraphError(f"{what} '{path}' does not exist; {advice}") from None
    except SafetensorError as e:
        raise NodegraphError(f"{what} '{path}' is damaged (cut short, or not a safetensors "
                             f"file: {e}); {advice}") from None
    except OSError as e:
        raise NodegraphError(f"cannot read {what} '{path}': {reason(e)}; {advice}") from None


_DAMAGED = ("start afresh without --resume (or with another --checkpoint-dir), or restore "
            "the checkpoint folder from a copy")


def _damaged(path: Path, problem: str) -> NodegraphError:
    return NodegraphError(f"checkpoint file '{path}' is damaged: {problem}; {_DAMAGED}")


_INFO_FIELDS = {"epoch": int, "next": int, "history": list, "global_step": int,
                "monitor": dict, "schedules": dict, "optimizers": dict, "callbacks": dict}
_REQUIRED = ("epoch", "next", "history")


def _read_info(path: Path) -> dict:
    """trainer.json as a dict whose fields have the types resuming relies on."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise _damaged(path, f"it is not valid JSON ({e.msg}: line {e.lineno} column "
                       f"{e.colno}; a cut-short file ends like this)") from None
    except UnicodeDecodeError:
        raise _damaged(path, "it is not text (not UTF-8)") from None
    except OSError as e:
        raise NodegraphError(f"cannot read checkpoint file '{path}': {reason(e)}") from None
    if not isinstance(info, dict):
        raise _damaged(path, f"it holds a JSON {type(info).__name__}, not an object")
    missing = [k for k in _REQUIRED if k not in info]
    if missing:
        raise _damaged(path, f"it lacks {', '.join(missing)}")
    for key, kind in _INFO_FIELDS.items():
        if key in info and (not isinstance(info[key], kind) or isinstance(info[key], bool)):
            raise _damaged(path, f"'{key}' should be a JSON {_JSON_NAMES[kind]}, not "
                           f"{json.dumps(info[key])[:40]}")
    if info["epoch"] < 0 or info["next"] < 0:
        raise _damaged(path, "'epoch' and 'next' cannot be negative")
    if not all(isinstance(h, dict) for h in info["history"]):
        raise _damaged(path, "'history' should hold one object per epoch")
    return info


_JSON_NAMES = {int: "integer", list: "array", dict: "object"}


def save_weights(path: Path, weights: dict[str, torch.Tensor]) -> None:
    """Write weights as one safetensors file, whole or not at all (the old file stays)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(_contiguous(weights), str(tmp))
        tmp.replace(path)
    except (OSError, SafetensorError) as e:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"cannot write weights file '{path}': {reason(e, path)}; "
                          f"{advice(e)} (nothing was written there)") from None


def _contiguous(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().contiguous().cpu() for k, v in tensors.items()}


def _split_optimizer_state(name: str, sd: dict) -> tuple[dict[str, torch.Tensor], dict]:
    """An optimizer state dict as tensors (for safetensors) and the rest (for JSON)."""
    flat: dict[str, torch.Tensor] = {}
    plain: dict[str, dict[str, Any]] = {}
    for idx, entry in sd["state"].items():
        plain[str(idx)] = {}
        for key, value in entry.items():
            if isinstance(value, torch.Tensor):
                flat[f"optim/{name}/{idx}/{key}"] = value
            else:
                plain[str(idx)][key] = value
    return flat, {"state": plain, "param_groups": sd["param_groups"]}


def _join_optimizer_state(name: str, meta: dict, tensors: dict[str, torch.Tensor]) -> dict:
    state: dict[int, dict[str, Any]] = {int(i): dict(v) for i, v in meta["state"].items()}
    prefix = f"optim/{name}/"
    for key, value in tensors.items():
        if key.startswith(prefix):
            idx, field = key[len(prefix):].split("/", 1)
            state.setdefault(int(idx), {})[field] = value
    return {"state": state, "param_groups": meta["param_groups"]}
