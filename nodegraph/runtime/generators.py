"""Every random-number generator a run draws from, as tensors to save and put back.

A run draws from torch's global CPU generator (weight noise, Dropout masks, random
augmentation in the main process), from each CUDA device's when there are any, from
numpy's and Python's global generators (code in a block or a callback may use them), and
from the trainer's own batch-order generator (`Trainer.shuffle_rng`). The samplers and the
DataLoader workers draw nothing of their own: each epoch's permutation and every sample's
transform seed come from one number drawn from the batch-order generator
(`nodegraph.kinds.loading`), so that generator's state fixes them too. Checkpoints and
saved models (`.ngz`) keep all of these, so continuing a run draws exactly what one longer
run would have drawn.

The states are stored as tensors (safetensors, nothing pickled) under `rng/...`:
``rng/torch`` and ``rng/shuffle`` (uint8, torch's own format), ``rng/cuda/N``,
``rng/numpy`` (int64: the 624 Mersenne-Twister words, the position, the Gaussian flag) with
``rng/numpy_gauss`` (float64), ``rng/python`` (int64: the 625 words) with
``rng/python_gauss`` (float64: a flag and the cached value).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

from nodegraph.model.errors import NodegraphError

TORCH_STATE_BYTES = 5056  # torch's CPU generator state, as `get_rng_state` returns it
MT_WORDS = 624


def capture(shuffle: torch.Generator) -> dict[str, torch.Tensor]:
    """The state of every generator a run draws from, and of the batch order's."""
    out = {"rng/torch": torch.get_rng_state(), "rng/shuffle": shuffle.get_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, device_state in enumerate(torch.cuda.get_rng_state_all()):
            out[f"rng/cuda/{i}"] = device_state
    numpy_state: Any = np.random.get_state(legacy=True)  # ("MT19937", keys, pos, flag, gauss)
    _, keys, pos, has_gauss, gauss = numpy_state
    out["rng/numpy"] = torch.tensor([*np.asarray(keys).tolist(), pos, has_gauss],
                                    dtype=torch.int64)
    out["rng/numpy_gauss"] = torch.tensor([gauss], dtype=torch.float64)
    version, words, gauss_next = random.getstate()
    out["rng/python"] = torch.tensor(list(words), dtype=torch.int64)
    out["rng/python_gauss"] = torch.tensor(
        [0.0 if gauss_next is None else 1.0, gauss_next or 0.0], dtype=torch.float64)
    return out


def restore(tensors: dict[str, torch.Tensor], shuffle: torch.Generator,
            where: str = "the saved run") -> None:
    """Put back the generators `capture` saved; a state that is absent (an older file)
    leaves its generator as it is. A state of the wrong size or kind is an error naming
    `where` and the generator, before any generator is changed."""
    checked = check(tensors, where)
    try:
        _put_back(checked, shuffle)
    except (RuntimeError, ValueError, TypeError, OverflowError) as e:
        raise NodegraphError(f"{where}: a generator state cannot be put back ({e})") from None


def _put_back(checked: dict[str, torch.Tensor], shuffle: torch.Generator) -> None:
    if "rng/torch" in checked:
        torch.set_rng_state(checked["rng/torch"])
    if "rng/shuffle" in checked:
        shuffle.set_state(checked["rng/shuffle"])
    cuda = sorted(k for k in checked if k.startswith("rng/cuda/"))
    if cuda and torch.cuda.is_available():
        count = torch.cuda.device_count()
        for key in cuda:
            index = int(key.rsplit("/", 1)[1])
            if index < count:
                torch.cuda.set_rng_state(checked[key], index)
    if "rng/numpy" in checked:
        words = checked["rng/numpy"].tolist()
        gauss = float(checked["rng/numpy_gauss"][0]) if "rng/numpy_gauss" in checked else 0.0
        np.random.set_state(("MT19937", np.array(words[:MT_WORDS], dtype=np.uint32),
                             int(words[MT_WORDS]), int(words[MT_WORDS + 1]), gauss))
    if "rng/python" in checked:
        flag, value = checked.get("rng/python_gauss", torch.zeros(2, dtype=torch.float64)
                                  ).tolist()
        random.setstate((3, tuple(int(w) for w in checked["rng/python"].tolist()),
                         value if flag else None))


_SIZES = {"rng/torch": (torch.uint8, TORCH_STATE_BYTES), "rng/shuffle": (torch.uint8,
          TORCH_STATE_BYTES), "rng/numpy": (torch.int64, MT_WORDS + 2),
          "rng/numpy_gauss": (torch.float64, 1), "rng/python": (torch.int64, MT_WORDS + 1),
          "rng/python_gauss": (torch.float64, 2)}
CUDA_STATE_BYTES = 16  # philox seed and offset


def expected(key: str) -> tuple[torch.dtype, int] | None:
    """The dtype and element count the generator state `key` has; None for a key that is
    no generator's."""
    if key.startswith("rng/cuda/") and key.rsplit("/", 1)[1].isdigit():
        return torch.uint8, CUDA_STATE_BYTES
    return _SIZES.get(key)


def check(tensors: dict[str, torch.Tensor], where: str) -> dict[str, torch.Tensor]:
    """The `rng/` entries of `tensors`, each of its generator's dtype and size, with word
    values in range; otherwise a NodegraphError naming `where` and the entry."""
    out = {}
    for key, t in tensors.items():
        if not key.startswith("rng/"):
            continue
        want = expected(key)
        if want is None:
            raise NodegraphError(f"{where}: '{key}' is no generator's state")
        if t.dtype != want[0] or t.dim() != 1 or t.numel() != want[1]:
            raise NodegraphError(f"{where}: generator state '{key}' should be {want[1]} "
                                 f"values of {want[0]}, not {tuple(t.shape)} of {t.dtype}")
        out[key] = t
    for key in ("rng/torch", "rng/shuffle"):
        if key in out:
            try:
                torch.Generator().set_state(out[key])  # a scratch one: nothing changes yet
            except RuntimeError as e:
                raise NodegraphError(f"{where}: generator state '{key}' is not one ({e})"
                                     ) from None
    for key in ("rng/numpy", "rng/python"):
        if key in out:
            words = out[key][:MT_WORDS]
            if bool((words < 0).any()) or bool((words >= 2 ** 32).any()):
                raise NodegraphError(f"{where}: generator state '{key}' holds a word outside "
                                     "32 bits")
    if "rng/numpy" in out and not 0 <= int(out["rng/numpy"][MT_WORDS]) <= MT_WORDS:
        raise NodegraphError(f"{where}: generator state 'rng/numpy' has a position outside "
                             f"0..{MT_WORDS}")
    if "rng/python" in out and not 0 <= int(out["rng/python"][MT_WORDS]) <= MT_WORDS:
        raise NodegraphError(f"{where}: generator state 'rng/python' has a position outside "
                             f"0..{MT_WORDS}")
    return out
