"""Checkpoints as safetensors plus a small JSON, written so a crash never loses the last one.

A checkpoint is a folder `last/` inside the run's checkpoint directory:
``model.safetensors`` (weights keyed `node.param`), ``state.safetensors`` (optimizer
moments and random-number-generator states) and ``trainer.json`` (epoch, history,
early-stopping counters, schedule states, optimizer hyper-parameters). It is written to a
temporary folder first and swapped in with renames, so at any instant there is one complete
checkpoint on disk. Nothing is pickled.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from nodegraph.errors import NodegraphError

LAST = "last"


def save(directory: Path, weights: dict[str, torch.Tensor],
         optimizers: dict[str, dict], tensors: dict[str, torch.Tensor], info: dict) -> Path:
    """Write a complete checkpoint and make it `last`, replacing the previous one."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{LAST}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    state, opt_json = dict(tensors), {}
    for name, sd in optimizers.items():
        flat, meta = _split_optimizer_state(name, sd)
        state.update(flat)
        opt_json[name] = meta
    save_file(_contiguous(weights), str(tmp / "model.safetensors"))
    save_file(_contiguous(state), str(tmp / "state.safetensors"))
    (tmp / "trainer.json").write_text(json.dumps({**info, "optimizers": opt_json}, indent=1))
    final, old = directory / LAST, directory / f".{LAST}.old"
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def load(directory: Path) -> tuple[dict[str, torch.Tensor], dict[str, dict],
                                   dict[str, torch.Tensor], dict]:
    """Read `last` (or the previous one a crash left mid-swap): weights, optimizer state
    dicts by node, other tensors, and the trainer info."""
    folder = directory / LAST
    if not folder.exists() and (directory / f".{LAST}.old").exists():
        folder = directory / f".{LAST}.old"
    if not (folder / "trainer.json").exists():
        raise NodegraphError(f"no checkpoint to resume from in {directory}")
    weights = load_file(str(folder / "model.safetensors"))
    state = load_file(str(folder / "state.safetensors"))
    info = json.loads((folder / "trainer.json").read_text())
    optimizers = {name: _join_optimizer_state(name, meta, state)
                  for name, meta in info.pop("optimizers", {}).items()}
    others = {k: v for k, v in state.items() if not k.startswith("optim/")}
    return weights, optimizers, others, info


def save_weights(path: Path, weights: dict[str, torch.Tensor]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    save_file(_contiguous(weights), str(tmp))
    tmp.replace(path)


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
