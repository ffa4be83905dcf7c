"""Datasets read sample by sample: the streaming kind behind the `Dataset` interface.

`nodegraph.kinds.dataset.Dataset` holds every split as whole tensors on the device: the
fastest path for data that fits. A `StreamedDataset` holds, per split, a torch dataset that
reads one sample at a time (a list of files decoded in ``__getitem__``, as torchvision's
``ImageFolder`` does) and a `torch.utils.data.DataLoader` reads it with worker processes,
pinned memory and prefetching (`nodegraph.kinds.loading`). Both answer the same questions
— `has`, `size`, `step_batch`, `num_batches`, `meta`, `batches`, `to`, `astype`,
`normalization` — so the trainer, `forward`, procedures, the Python export and the
editor's Preview take either.

What a data block hands over: ``StreamedDataset(sources, ports, batch_size, shuffle,
transforms=..., batch_transforms=..., node=...)`` where `sources` maps each non-empty split
to a map-style torch dataset (``__len__``; ``__getitem__(i)`` returns one sample as a dict
port -> tensor / ndarray / number, without a batch dimension) or to a `ShardSource` (an
iterable over shards, `nodegraph.kinds.loading`), and `ports` gives one sample's shape and
dtype per port (validation's meta, declared, never read from the data). `transforms[split]`
runs per sample in the workers (the training split's may be random; val/test get the
deterministic part), `batch_transforms[split]` on each collated batch (MixUp, CutMix).
Randomness is seeded per sample from the epoch's seed and the sample's index, so a run
reproduces whatever the number of workers. A sample that cannot be read raises
`SampleError`; with ``on_error="skip"`` it is left out and counted, the count reported at
the end of the epoch.

`choose_storage` turns a streamed dataset into the in-memory kind when the block's
``storage`` param (`STORAGE_PARAM`) says so, or, on ``auto``, when it fits and has no
random augmentation.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from nodegraph.kinds.dataset import Dataset
from nodegraph.kinds.loading import LoaderOptions, epoch_batches
from nodegraph.kinds.loading import SampleError as SampleError  # where the data blocks find it
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import choice_param

# one sample's shape and dtype per port, e.g. {"x": ((3, 32, 32), torch.float32)}
Ports = dict[str, tuple[tuple[int, ...], torch.dtype]]
Sample = dict[str, Any]

STORAGE_PARAM = choice_param(
    "storage", ("auto", "memory", "stream"), "auto",
    "memory: decode everything once and hold it as tensors (fastest for data that fits); "
    "stream: read samples in worker processes every epoch (data larger than memory, random "
    "augmentation); auto: memory when it fits in MEMORY_LIMIT and nothing is augmented")

# auto keeps data in memory up to this many bytes (beyond, or with augmentation, it streams)
MEMORY_LIMIT = 2 << 30
# whole-split tensors (`tensors`) of a streamed dataset are made up to this many bytes
TENSORS_LIMIT = 1 << 30


@dataclass
class StreamScript:
    """A streamed data block as code, for the Python export (`nodegraph.interop.export.stream`):
    a block whose reads can be written in a few lines sets ``dataset.script`` to a callable
    ``script(node) -> StreamScript``. `readers[split]` is the call making the split's
    map-style reader, (callee, argument expressions); they may read ``arrays["node/..."]``,
    the .npz beside the script, which holds `arrays`. `transforms[split]` is (steps, onehot,
    flat): the per-sample steps on port x as ``v2.`` expressions (torchvision.transforms.v2),
    the classes labels become one-hot over (None: kept) and whether x is flattened; None when
    nothing applies. `batch_steps` are the training batches' MixUp/CutMix expressions.
    `definitions` are the classes the readers need, `imports` theirs (module, name, alias)."""

    readers: dict[str, tuple[str, list[str]]]
    arrays: dict[str, np.ndarray]
    definitions: list[str] = field(default_factory=list)
    imports: list[tuple[str, str, str]] = field(default_factory=list)
    transforms: dict[str, tuple[list[str], int | None, bool] | None] = field(
        default_factory=dict)
    batch_steps: list[str] = field(default_factory=list)


class StreamedDataset:
    """A dataset read per sample by DataLoader workers, batched as the in-memory kind is."""

    streamed = True
    vocab: Any = None  # as `Dataset.vocab`
    categories: dict[str, Any] | None = None  # as `Dataset.categories`

    def __init__(self, sources: dict[str, Any], ports: Ports, batch_size: int = 32,
                 shuffle: bool = True, transforms: Mapping[str, Callable] | None = None,
                 batch_transforms: Mapping[str, Callable] | None = None,
                 augmented: bool = False, node: str | None = None, on_error: str = "stop"):
        self.sources = {s: src for s, src in sources.items() if len(src) > 0}
        if not self.sources:
            raise NodegraphError("the data has no samples")
        self.port_shapes = dict(ports)  # one sample's (shape, dtype) per port
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.transforms = dict(transforms or {})
        self.batch_transforms = dict(batch_transforms or {})
        self.augmented = augmented  # the training transforms are random (memory cannot hold them)
        self.node = node
        self.on_error = on_error
        self.normalization: dict[str, dict[str, torch.Tensor]] = {}
        self.device = torch.device("cpu")
        self.dtype: torch.dtype | None = None
        self.options = LoaderOptions()
        self.rank, self.world = 0, 1
        self.skipped: dict[str, int] = {}
        # with on_error = skip, the files named and why: those a block left out before any
        # split (refused at its header stage; counted again each epoch), and those the
        # workers skipped since the trainer last took them (`take_skipped`)
        self.refused: list[dict[str, str]] = []
        self.epoch_skips: list[dict[str, str]] = []
        # how skipped samples are reported at the end of an epoch; the trainer routes it
        # to its events
        self.report: Callable[[str], None] = lambda text: warnings.warn(text, stacklevel=2)
        self._loaders: dict[tuple, tuple] = {}  # (sampler, DataLoader) per split and share
        self._tensors: dict[str, dict[str, torch.Tensor]] = {}

    # -- the questions the in-memory kind answers --------------------------------------

    @property
    def ports(self) -> list[str]:
        return list(self.port_shapes)

    def has(self, split: str) -> bool:
        return split in self.sources

    def size(self, split: str) -> int:
        src = self.sources.get(split)
        return 0 if src is None else len(src)

    def step_batch(self, split: str = "train") -> int:
        n = self.size(split)
        return n if self.batch_size == 0 else min(self.batch_size, n)

    def num_batches(self, split: str) -> int:
        b = self.step_batch(split)
        return 0 if b == 0 else -(-self.size(split) // b)

    def sample_ports(self) -> Ports:
        """One sample's shape and dtype per port, as the batches will carry them."""
        return {k: (shape, self._dtype(dtype)) for k, (shape, dtype) in self.port_shapes.items()}

    def meta(self) -> dict[str, torch.Tensor]:
        """A meta tensor per port shaped like one training batch, for shape inference."""
        b = self.step_batch("train")
        return {k: torch.empty((b, *shape), dtype=dtype, device="meta")
                for k, (shape, dtype) in self.sample_ports().items()}

    def to(self, device: torch.device | str) -> StreamedDataset:
        self.device = torch.device(device)
        self._tensors = {s: {k: t.to(device) for k, t in part.items()}
                         for s, part in self._tensors.items()}
        return self

    def astype(self, dtype: torch.dtype) -> StreamedDataset:
        """Floating ports in `dtype` (labels and indices keep their integer type)."""
        self.dtype = dtype
        self._tensors = {s: {k: t.to(dtype) if t.is_floating_point() else t
                             for k, t in part.items()} for s, part in self._tensors.items()}
        return self

    def normalization_state(self) -> dict[str, torch.Tensor]:
        return {f"{port}.{k}": v for port, st in self.normalization.items()
                for k, v in st.items()}

    def normalize_raw(self, port: str, raw: torch.Tensor) -> torch.Tensor:
        st = self.normalization.get(port)
        if st is None:
            return raw
        return (raw - st["centre"].to(raw.device)) / st["scale"].to(raw.device)

    def renormalize(self, port: str, centre: torch.Tensor, scale: torch.Tensor) -> None:
        """Scale `port` with a trained model's statistics: batches are scaled as they come."""
        self.normalization[port] = {"centre": centre.detach().cpu(),
                                    "scale": scale.detach().cpu()}
        self._tensors = {}

    # -- streaming ---------------------------------------------------------------------

    def configure(self, options) -> StreamedDataset:
        """Read with these `nodegraph.kinds.loading.LoaderOptions` (the run's training.*)."""
        self.options = options
        self._loaders = {}
        return self

    def shard(self, rank: int, world: int) -> StreamedDataset:
        """Under data-parallel training: read only this rank's share of each global batch."""
        self.rank, self.world = rank, world  # the loaders are kept per (rank, world)
        return self

    def global_batch(self, split: str, step: int) -> int:
        """Samples in global batch `step` (from 1) of `split`, summed over the ranks."""
        b = self.step_batch(split)
        return max(0, min(b, self.size(split) - (step - 1) * b))

    def batches(self, split: str, shuffle: bool = False, generator: torch.Generator | None = None,
                node: str | None = None, batch_size: int | None = None,
                plain: bool = False) -> Iterator[dict]:
        """Yield batches of `split` as dicts port -> tensor, or (node, port) -> tensor when
        `node` is given; shuffled (and augmented, on the training split) with a seed drawn
        from `generator`, so a seeded run reproduces. `plain`: no random augmentation, the
        training split read as val/test are (predicting, evaluating a trained model)."""
        if split not in self.sources:
            return
        seed = (int(torch.randint(0, 2 ** 62, (1,), generator=generator))
                if generator is not None else 0)
        for batch in epoch_batches(self, split, shuffle, seed, batch_size, plain):
            yield self._finish(batch, node)

    def plain_transform(self, split: str) -> Callable | None:
        """The deterministic per-sample transform of `split`: its own on val/test, on the
        training split the val/test one when the training one is random."""
        if split != "train" or not self.augmented:
            return self.transforms.get(split)
        for other in ("val", "test"):
            if other in self.transforms:
                return self.transforms[other]
        if "train" in self.transforms:
            raise NodegraphError(f"{self.node or 'data'}: the training split is randomly "
                                 "augmented and the block gives no deterministic (val/test) "
                                 "transform to read it without augmentation")
        return None

    def _finish(self, batch: dict[str, torch.Tensor], node: str | None) -> dict:
        """A collated CPU batch on the training device, in its dtype, normalised."""
        blocking = not (self.options.pin and self.device.type == "cuda")
        out = {}
        for k, t in batch.items():
            t = t.to(self.device, non_blocking=not blocking)
            if t.is_floating_point():
                if k in self.normalization:
                    st = self.normalization[k]
                    t = (t - st["centre"].to(t.device)) / st["scale"].to(t.device)
                if self.dtype is not None:
                    t = t.to(self.dtype)
            out[(node, k) if node is not None else k] = t
        return out

    def end_epoch(self, split: str, skipped: int, first: str | None,
                  bad: Sequence[str] = ()) -> None:
        """Report the samples skipped in one pass over `split` (`bad`: each one's message),
        and on the training split the files left out before it (`refused`): the count,
        the first few names; every one is kept for the run's history (`take_skipped`)."""
        left_out = self.refused if split == "train" else []
        if not skipped and not left_out:
            return
        entries = [{**skip_entry(m), "split": split} for m in bad]
        self.epoch_skips += [*({**e, "split": split} for e in left_out), *entries]
        if skipped:
            self.skipped[split] = self.skipped.get(split, 0) + skipped
        total = skipped + len(left_out)
        first = first or (f"{left_out[0]['reason']}" if left_out else None)
        where = f" (first: {first})" if first else ""
        names = [e["file"] for e in [*left_out, *entries]][1:SHOWN]
        more = total - 1 - len(names)
        also = (f"; also {', '.join(names)}{f' and {more:,} more' if more > 0 else ''}"
                if names else "")
        when = (f" ({len(left_out)} refused when listed, {skipped} when read)"
                if left_out and skipped else " (refused when listed)" if left_out else "")
        self.report(f"{self.node or 'data'}: skipped {total} unreadable sample"
                    f"{'s' if total != 1 else ''} of the {split} split{where}{also}{when}")

    def take_skipped(self) -> list[dict[str, str]]:
        """The skipped files reported since the last call (for one epoch's history)."""
        out, self.epoch_skips = self.epoch_skips, []
        return out

    # -- whole tensors, for the few users that need a split at once ----------------------

    def tensors(self, split: str, limit: int | None = TENSORS_LIMIT) -> dict[str, torch.Tensor]:
        """The whole split as tensors (its transforms, seed 0), made once; refused above
        `limit` bytes, a split only the streaming path should hold."""
        if split not in self._tensors:
            nbytes = self.size(split) * _sample_bytes(self.sample_ports())
            if limit is not None and nbytes > limit:
                raise NodegraphError(
                    f"{self.node or 'data'}: the {split} split is streamed ({nbytes / 2**30:.1f}"
                    " GiB) and cannot be held as whole tensors for this use; use a smaller "
                    "dataset or storage = memory")
            parts = list(self.batches(split, batch_size=max(1, self.step_batch(split))))
            if not parts:  # every sample of the split was unreadable and skipped
                bad = [e["file"] for e in self.epoch_skips if e.get("split") == split]
                named = f": {', '.join(bad[:3])}{' …' if len(bad) > 3 else ''}" if bad else ""
                raise NodegraphError(f"{self.node or 'data'}: the {split} split has no readable "
                                     f"sample (each was skipped{named})")
            self._tensors[split] = {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
        return self._tensors[split]

    def materialise(self) -> Dataset:
        """The same data as the in-memory kind: every split read once, deterministically."""
        if self.augmented:
            raise NodegraphError(f"{self.node or 'data'}: random augmentation runs per sample "
                                 "while streaming; storage = memory cannot hold it (use auto "
                                 "or stream)")
        splits = [s for s in self.sources]
        parts = {s: self.tensors(s, limit=None) for s in splits}
        tensors = {k: torch.cat([parts[s][k] for s in splits]) for k in self.port_shapes}
        # rows as read: a sample skipped as unreadable (reported) leaves its split shorter
        offsets = np.cumsum([0] + [len(parts[s][next(iter(self.port_shapes))])
                                   for s in splits])
        idx = {s: torch.arange(int(offsets[i]), int(offsets[i + 1]))
               for i, s in enumerate(splits)}
        data = Dataset(tensors, idx, self.batch_size, self.shuffle)
        data.normalization = self.normalization  # the tensors above are scaled with it
        data.skips = [*self.refused, *self.take_skipped()]  # type: ignore[attr-defined]
        return data

    def estimated_bytes(self) -> int:
        """Bytes every split would take as tensors."""
        return sum(self.size(s) for s in self.sources) * _sample_bytes(self.sample_ports())

    def _dtype(self, dtype: torch.dtype) -> torch.dtype:
        return self.dtype if self.dtype is not None and dtype.is_floating_point else dtype


def _sample_bytes(ports: Ports) -> int:
    return sum(math.prod(shape) * torch.empty((), dtype=dtype).element_size()
               for shape, dtype in ports.values())


def streams(storage: str, augmented: bool, nbytes: int, limit: int | None = None) -> bool:
    """Whether data of `nbytes` is streamed under the `storage` param: always on stream,
    never on memory, on auto when it is randomly augmented or larger than `limit` (by
    default MEMORY_LIMIT, or half the memory available when that is less: auto never
    picks the in-memory kind for data the machine cannot hold)."""
    if storage in ("stream", "memory"):
        return storage == "stream"
    if limit is None:
        from nodegraph.kinds.footprint import limit_bytes

        available = limit_bytes()
        limit = MEMORY_LIMIT if available is None else min(MEMORY_LIMIT, available // 2)
    return augmented or nbytes > limit


SHOWN = 4  # skipped files named on the console per pass; the history holds all of them
_QUOTED = re.compile(r"'([^']+)'")


def skip_entry(message: str) -> dict[str, str]:
    """{"file": ..., "reason": ...} for a skipped sample's message: the file is the first
    quoted name in it (readers quote it: "image 'a.jpg' is damaged"), else what precedes
    the first colon ("row3.bin: not a row")."""
    m = _QUOTED.search(message)
    name = m.group(1) if m else message.split(": ", 1)[0] if ": " in message else ""
    return {"file": name, "reason": message}


def choose_storage(data: StreamedDataset, storage: str = "auto",
                   limit: int | None = None) -> Dataset | StreamedDataset:
    """The dataset a block returns: in memory on ``memory``, streamed on ``stream``; on
    ``auto`` in memory when it fits in `limit` bytes and nothing is randomly augmented."""
    if streams(storage, data.augmented, data.estimated_bytes(), limit):
        return data
    return data.materialise()


def is_streamed(dataset: Any) -> bool:
    """True for the streaming kind (no whole tensors on the device)."""
    return getattr(dataset, "streamed", False)
