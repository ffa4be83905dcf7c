"""Per-sample transforms of a data block: augmentation chained from transform blocks.

A transform block (``kinds.transform``, `nodes/augment.py`) builds one `Step`: what it does
to a training sample (may be random: a crop, a flip), its deterministic part for val/test
(a centre crop, nothing), or what it does to a whole training batch (MixUp, CutMix). Blocks
are wired into a chain, ``input`` to ``transform``, the last one into a data block's
``augment`` input; validation and compile hand the chain to the data block's build and
meta through `given` (a context, as data paths are), and the block turns it into the
per-split callables of its `StreamedDataset`. The callables are built from
`torchvision.transforms.v2` and run in the DataLoader workers, seeded per sample
(`nodegraph.kinds.loading`), so a run reproduces.

Batch steps turn class indices into class probabilities (N, classes): with one in the
chain the label port carries probabilities on every split (one-hot on val/test), so the
port's shape does not depend on the split.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch

from nodegraph.model.errors import NodegraphError


@dataclass(frozen=True)
class Step:
    """One transform: `train` on a training sample's tensor (random allowed), `eval` on a
    val/test sample's (deterministic; None: unchanged), or `batch` on a training batch's
    (images, class indices) giving (images, class probabilities over `classes`)."""

    name: str
    train: Callable | None = None
    eval: Callable | None = None
    batch: Callable | None = None
    classes: int | None = None
    # the same three as torchvision.transforms.v2 expressions (``v2.`` prefixed) for the
    # Python export; "{hw}" stands for the input's (height, width)
    script: tuple[str | None, str | None, str | None] | None = None
    # the shorter side (train, eval) this step needs of its input at full quality, when it
    # is a chain's first step: a photo may be decoded smaller (JPEG draft) down to it
    side: tuple[int | None, int | None] = (None, None)
    floats: bool = False  # needs float pixels (Normalize): uint8 photos are scaled first


@dataclass(frozen=True)
class Chain:
    """The transforms wired into a data block's augment input, in order."""

    steps: tuple[Step, ...] = ()

    def then(self, step: Step) -> Chain:
        return Chain((*self.steps, step))

    @property
    def random(self) -> bool:
        """True when the training split is transformed differently from val/test."""
        return any(s.batch is not None or s.train is not s.eval for s in self.steps)

    @property
    def classes(self) -> int | None:
        """Classes of the label probabilities batch steps make (None: labels stay indices)."""
        counts = {s.classes for s in self.steps if s.batch is not None and s.classes}
        if len(counts) > 1:
            raise NodegraphError(f"MixUp/CutMix steps disagree on num_classes: {sorted(counts)}")
        return next(iter(counts), None)

    def _fns(self, split: str, raw: bool) -> tuple[Callable, ...]:
        """The split's per-sample functions; on `raw` (uint8) photos, `ToFloat` before the
        first step that needs floats, or last."""
        fns: list[Callable] = []
        for s in self.steps:
            f = s.train if split == "train" else s.eval
            if raw and s.floats and not any(isinstance(g, ToFloat) for g in fns):
                fns.append(ToFloat())
            if f is not None:
                fns.append(f)
        if raw and not any(isinstance(g, ToFloat) for g in fns):
            fns.append(ToFloat())
        return tuple(fns)

    def side(self, split: str) -> int | None:
        """The shorter side a photo may be decoded down to for `split` (None: full size)."""
        first = next((s for s in self.steps if (s.train if split == "train" else s.eval)
                      is not None), None)
        return None if first is None else first.side[0 if split == "train" else 1]

    def fixed_shape(self, channels: int) -> tuple[int, ...] | None:
        """The sample shape the chain gives whatever the photo's size (a crop or resize that
        fixes it), or None when the output follows the input's size."""
        if not self.steps:
            return None
        outs = {self.shape((channels, h, w), torch.uint8, raw=True)
                for h, w in ((61, 97), (203, 150))}
        return outs.pop() if len(outs) == 1 else None

    def eval_parts(self, channels: int) -> tuple[tuple, tuple, tuple[str, ...]]:
        """The eval chain on raw (uint8) photos cut where the size becomes fixed: the steps
        a photo reader runs on one photo of any size, then the steps (and their v2 text)
        that run on a batch of fixed-size images in [0, 1] (the model's preprocessing)."""
        fns = self._fns("val", True)
        exprs = self.script("val", (channels, 61, 97), raw=True)[0]
        k = 0
        for k in range(len(fns) + 1):
            outs = set()
            for h, w in ((61, 97), (203, 150)):
                t = torch.zeros((channels, h, w), dtype=torch.uint8)
                for f in fns[:k]:
                    t = f(t)
                outs.add(tuple(t.shape))
            if len(outs) == 1:
                break
        post = [(f, e) for f, e in zip(fns[k:], exprs[k:], strict=True)
                if not isinstance(f, ToFloat)]
        return fns[:k], tuple(f for f, _ in post), tuple(e for _, e in post)

    def sample(self, split: str, x: str = "x", y: str = "y", raw: bool = False
               ) -> Callable | None:
        """The per-sample transform of `split` on port `x` (labels on `y` one-hot on val
        and test when a batch step makes probabilities), or None when nothing applies.
        `raw`: x arrives as a uint8 photo of any size (scaled to [0, 1] on the way)."""
        fns = _fused(self._fns(split, raw))
        onehot = self.classes if split != "train" else None
        if not fns and onehot is None:
            return None
        return OnSample(fns, x, y, onehot)

    def eval_steps(self, raw: bool = False) -> tuple[Callable, ...]:
        """The deterministic per-sample transforms val/test apply to port x, in order (a
        centre crop for a random crop, Normalize; the random steps are left out): what a
        trained model needs on a raw input at inference. They take a batch (N, C, H, W)
        as well as one sample. `raw`: from a uint8 photo (`ToFloat` among them)."""
        return self._fns("val", raw) if raw else tuple(s.eval for s in self.steps
                                                       if s.eval is not None)

    def batch(self, x: str = "x", y: str = "y") -> Callable | None:
        """The training batch transform (one batch step chosen at random per batch)."""
        fns = tuple(s.batch for s in self.steps if s.batch is not None)
        if not fns:
            return None
        self.classes  # noqa: B018  (refuses disagreeing class counts)
        return OnBatch(fns, x, y)

    def shape(self, shape: tuple[int, ...], dtype: torch.dtype = torch.float32,
              raw: bool = False) -> tuple[int, ...]:
        """One sample's shape on port x after the chain, found by running it on zeros; the
        training and evaluation transforms must agree on it."""
        if not self.steps:
            return shape
        outs = {}
        for split in ("train", "val"):
            fn = self.sample(split, raw=raw)
            sample = {"x": torch.zeros(shape, dtype=dtype), "y": torch.tensor(0)}
            try:
                with torch.random.fork_rng(devices=[]):
                    outs[split] = tuple((fn(sample) if fn else sample)["x"].shape)
            except (TypeError, ValueError, RuntimeError) as e:
                raise NodegraphError(f"the augmentation cannot run on samples shaped "
                                     f"{shape}: {e}") from e
        if outs["train"] != outs["val"]:
            raise NodegraphError(f"the augmentation gives {outs['train']} on the training "
                                 f"split but {outs['val']} on val/test; give the deterministic "
                                 "steps the same size")
        return outs["train"]

    def script(self, split: str, shape: tuple[int, ...], raw: bool = False
               ) -> tuple[list[str], int | None]:
        """The per-sample transform of `split` as v2 expressions, in order (for samples
        shaped `shape` on port x), and the classes labels are one-hot over (None: kept).
        `raw`: from uint8 photos, as `sample` says. Raises NodegraphError naming a step
        that has no script form."""
        exprs: list[str] = []
        scaled = not raw
        for s in self.steps:
            fn = s.train if split == "train" else s.eval
            if not scaled and s.floats:
                exprs.append(TO_FLOAT)
                scaled = True
            if fn is None:
                continue
            if s.script is None:
                raise NodegraphError(f"the augmentation step {s.name} has no script form")
            text = s.script[0 if split == "train" else 1]
            exprs.append(str(text).replace("{hw}", repr(tuple(shape[-2:]))))
            with torch.random.fork_rng(devices=[]):
                shape = tuple(fn(torch.zeros(shape)).shape)
        if not scaled:
            exprs.append(TO_FLOAT)
        return exprs, (self.classes if split != "train" else None)

    def batch_script(self) -> list[str]:
        """The batch steps as v2 expressions (one is drawn per batch when several)."""
        out = []
        for s in self.steps:
            if s.batch is not None:
                if s.script is None or s.script[2] is None:
                    raise NodegraphError(f"the augmentation step {s.name} has no script form")
                out.append(s.script[2])
        return out

    def label_port(self, shape: tuple[int, ...], dtype: torch.dtype
                   ) -> tuple[tuple[int, ...], torch.dtype]:
        """The label port's sample shape and dtype after the chain."""
        k = self.classes
        return ((k,), torch.float32) if k is not None else (shape, dtype)


TO_FLOAT = "v2.ToDtype(torch.float32, scale=True)"


class ToFloat:
    """uint8 pixels to float32 in [0, 1] (float ones pass): where a raw photo's chain
    leaves integers (torchvision's ToDtype(float32, scale=True))."""

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(torch.float32).mul_(1.0 / 255) if t.dtype == torch.uint8 else t


class ScaledNormalize:
    """`ToFloat` then a Normalize in one pass over a uint8 photo: x * 1/(255 std) - mean/std,
    the float tensor made by the multiplication itself (what the two steps compute, to float
    rounding, with one pass and one new tensor instead of four passes and two); anything
    else (float pixels, a channel count the mean does not match) goes through both."""

    def __init__(self, normalize: Callable):
        self.normalize = normalize
        mean = torch.tensor(normalize.mean, dtype=torch.float32).view(-1, 1, 1)  # type: ignore[attr-defined]
        std = torch.tensor(normalize.std, dtype=torch.float32).view(-1, 1, 1)  # type: ignore[attr-defined]
        self.scale, self.shift = 1.0 / (255.0 * std), -mean / std

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        if t.dtype != torch.uint8 or t.ndim != 3 or len(t) != len(self.scale):
            return self.normalize(ToFloat()(t))
        return torch.mul(t, self.scale).add_(self.shift)


def _fused(fns: tuple[Callable, ...]) -> tuple[Callable, ...]:
    """`fns` with each `ToFloat` directly followed by a plain Normalize (torchvision's v2,
    not in place) made one `ScaledNormalize`."""
    out: list[Callable] = []
    for f in fns:
        if (out and isinstance(out[-1], ToFloat) and type(f).__name__ == "Normalize"
                and isinstance(getattr(f, "mean", None), list | tuple)
                and isinstance(getattr(f, "std", None), list | tuple)
                and not getattr(f, "inplace", True)):
            out[-1] = ScaledNormalize(f)
        else:
            out.append(f)
    return tuple(out)


class OnSample:
    """Functions applied in order to one sample's `x` tensor (a class, not a closure, so
    DataLoader workers can receive it under any start method)."""

    def __init__(self, fns: tuple, x: str, y: str, onehot: int | None):
        self.fns, self.x, self.y, self.onehot = fns, x, y, onehot

    def __call__(self, sample: dict) -> dict:
        out = dict(sample)
        t = out[self.x]
        for fn in self.fns:
            t = fn(t)
        out[self.x] = t
        if self.onehot is not None:
            out[self.y] = torch.nn.functional.one_hot(out[self.y].long(),
                                                      self.onehot).to(torch.float32)
        return out


class OnBatch:
    """One of the batch functions, drawn at random, on a batch's (x, y)."""

    def __init__(self, fns: tuple, x: str, y: str):
        self.fns, self.x, self.y = fns, x, y

    def __call__(self, batch: dict) -> dict:
        fn = self.fns[int(torch.randint(len(self.fns), ()))] if len(self.fns) > 1 else self.fns[0]
        x, y = fn(batch[self.x], batch[self.y].long())
        return {**batch, self.x: x, self.y: y.to(torch.float32)}


_given: ContextVar[Chain | None] = ContextVar("nodegraph_augment", default=None)


@contextmanager
def augmenting(chain: Any) -> Iterator[None]:
    """Within this block, `given()` is `chain` (the transforms wired into a data block)."""
    token = _given.set(chain if isinstance(chain, Chain) else None)
    try:
        yield
    finally:
        _given.reset(token)


def given() -> Chain:
    """The transforms wired into the data block being built or described (empty: none)."""
    return _given.get() or Chain()
