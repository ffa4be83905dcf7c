"""How a `StreamedDataset` is read: DataLoader workers, samplers, seeds, shards.

Map-style sources are read through a `torch.utils.data.DataLoader` whose batch sampler
walks a permutation drawn from the epoch's seed and, under data-parallel training, hands
each rank its share of every global batch (the same split `Group.shard` makes of an
in-memory batch, so a run on N ranks follows the one-process run). The loader is made once
per split and kept; the training split's workers persist from epoch to epoch, while an
evaluation pass (val, test, the plain pass over train) starts its workers when it begins
and ends them after (issue #37: two persistent pools made 4 processes for 2 workers, the
evaluation ones idle through every training pass); the epoch's seed
reaches the workers inside the indices, ``(index, seed)``, and every sample's random
transform is seeded from it — augmentation is the same whatever the number of workers.
A sample that fails to read comes back as a `Bad` marker rather than an exception from
the worker (whose traceback would bury the file name); the main process then stops with
the message or, on ``on_error="skip"``, counts it.

`ShardSource` is the iterable kind: samples come from a list of shards (tar files, row
groups), each rank and each worker reading its own shards in a seeded order.

Worker counts, pinned memory, persistence and prefetch are `LoaderOptions`, chosen
automatically and settable as ``training.workers``, ``training.pin_memory``,
``training.persistent_workers`` and ``training.prefetch_factor``.

How workers start (`start_method`): forked where the reading thread is the process's only
Python thread (the CLI, a script), from a single-threaded fork server elsewhere (the
editor, its training process, a notebook's kernel), since a fork copies every lock as it is
at that instant and one held by another thread is never released in the worker (issue #32).
Each worker dies with its parent (`_worker_started`), and `release_workers` ends a dataset's
kept workers when a run ends.
"""

from __future__ import annotations

import ctypes
import gc
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import numpy as np
import torch
from torch.utils.data import (
    DataLoader,
    IterableDataset,
    Sampler,
    default_collate,
    get_worker_info,
)

from nodegraph.kinds import remote
from nodegraph.model.errors import NodegraphError

_MIX = 0x9E3779B97F4A7C15  # odd constant: spreads consecutive indices over the seed space


@dataclass(frozen=True)
class LoaderOptions:
    """DataLoader settings; None means choose automatically."""

    workers: int | None = None
    pin_memory: bool | None = None
    persistent_workers: bool | None = None
    prefetch_factor: int | None = None
    device: str = "cpu"

    @classmethod
    def of(cls, opts: Any, device: torch.device | str = "cpu") -> LoaderOptions:
        """The options of a run's training settings (missing keys: automatic)."""
        def get(name):
            try:
                return opts[name]
            except (KeyError, TypeError):
                return None
        return cls(get("workers"), get("pin_memory"), get("persistent_workers"),
                   get("prefetch_factor"), str(torch.device(device).type))

    def worker_count(self, samples: int) -> int:
        """Workers for a split of `samples`: the setting, else one per spare core (up to 8)
        for splits large enough to repay starting them."""
        if self.workers is not None:
            return self.workers
        if samples < 256:
            return 0
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            cores = os.cpu_count() or 1
        return max(0, min(8, cores - 1))

    @property
    def pin(self) -> bool:
        return self.pin_memory if self.pin_memory is not None else self.device == "cuda"


class SampleError(NodegraphError):
    """One sample could not be read (a corrupt or truncated file): the message names it."""


@dataclass(frozen=True)
class Bad:
    """A sample that could not be read, and why (the message names the file)."""

    message: str


def sample_seed(epoch_seed: int, index: int) -> int:
    """The seed of one sample's random transforms in one epoch."""
    return (epoch_seed ^ ((index + 1) * _MIX)) & ((1 << 63) - 1)


def to_tensors(sample: dict) -> dict[str, torch.Tensor]:
    """A reader's sample (tensors, arrays, numbers) as tensors: integers as int64, other
    numbers as float32, tensors as they are."""
    out = {}
    for k, v in sample.items():
        if isinstance(v, torch.Tensor):
            out[k] = v
        else:
            a = np.asarray(v)
            out[k] = torch.as_tensor(a, dtype=torch.long if np.issubdtype(a.dtype, np.integer)
                                     else torch.float32)
    return out


def read_one(source: Any, index: int, transform: Callable | None, seed: int) -> Any:
    """Sample `index` of `source` with `transform` applied under `seed`, or `Bad`."""
    try:
        sample = to_tensors(source[index])
        if transform is not None:
            sample = seeded(transform, sample, seed)
        return sample
    except SampleError as e:
        return Bad(str(e))
    except (OSError, ValueError, SyntaxError, EOFError) as e:  # what decoders raise
        return Bad(f"sample {index}: {e}")


def seeded(fn: Callable, value: Any, seed: int) -> Any:
    """`fn(value)` with torch's (CPU) random numbers drawn from `seed`; in the main process
    the global generator is left as it was (dropout masks do not depend on the data path).
    Only the CPU generator is seeded: `torch.manual_seed` also visits every accelerator
    backend, which costs about a millisecond a call — more than decoding a small JPEG."""
    cpu = torch.default_generator
    if get_worker_info() is not None:
        cpu.manual_seed(seed)
        return fn(value)
    state = cpu.get_state()
    try:
        cpu.manual_seed(seed)
        return fn(value)
    finally:
        cpu.set_state(state)


class _Samples(torch.utils.data.Dataset):
    """A map-style source read at ``(index, seed)`` keys, its transform applied."""

    def __init__(self, source: Any, transform: Callable | None):
        self.source, self.transform = source, transform

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, key: tuple[int, int]) -> Any:
        index, seed = key
        return read_one(self.source, index, self.transform, seed), seed


class EpochBatches(Sampler):
    """Batches of ``(index, seed)`` keys: a seeded permutation cut into global batches,
    of which this rank takes its `tensor_split` share."""

    def __init__(self, n: int, batch_size: int, shuffle: bool, rank: int = 0, world: int = 1):
        self.n, self.b, self.shuffle, self.rank, self.world = n, batch_size, shuffle, rank, world
        self.seed = 0

    def set_epoch(self, seed: int) -> None:
        self.seed = seed

    def __len__(self) -> int:
        return -(-self.n // self.b)

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        if self.shuffle and self.n > 1:
            order = torch.randperm(self.n, generator=torch.Generator().manual_seed(self.seed))
        else:
            order = torch.arange(self.n)
        for i in range(0, self.n, self.b):
            part = order[i:i + self.b].tensor_split(self.world)[self.rank].tolist()
            yield [(j, sample_seed(self.seed, j)) for j in part]


def collate(items: list, ports: dict, batch_transform: Callable | None = None) -> tuple:
    """(batch, bad messages): the good samples stacked per port (an empty batch shaped by
    `ports` when none is left), then the batch transform (MixUp, CutMix) under the first
    sample's seed."""
    good = [s for s, _ in items if not isinstance(s, Bad)]
    bad = [s.message for s, _ in items if isinstance(s, Bad)]
    if good:
        # stacked as torch's default_collate does: in a worker, straight into the shared
        # memory the batch crosses to the main process in (not copied there once more)
        batch = {k: default_collate([s[k] for s in good]) for k in good[0]}
        if batch_transform is not None:
            batch = seeded(batch_transform, batch, items[0][1])
    else:
        batch = {k: torch.empty((0, *shape), dtype=dtype) for k, (shape, dtype) in ports.items()}
    return batch, bad


class ShardSource(IterableDataset):
    """Samples read shard by shard (a list of files, row groups): each rank and each worker
    reads its own shards, in an order drawn from the epoch's seed. Subclasses say how
    many samples each shard holds (`counts`, known from headers) and implement `read`."""

    def __init__(self, shards: list, counts: list[int]):
        if len(shards) != len(counts):
            raise NodegraphError("a shard source needs one sample count per shard")
        self.shards, self.counts = list(shards), list(counts)
        self.epoch: tuple = (0, False, None, 0, 1)  # seed, shuffle, transform, rank, world

    def read(self, shard: Any) -> Iterator[dict]:
        """The samples of one shard, as dicts port -> value; raise SampleError naming the
        shard for a corrupt one."""
        raise NotImplementedError

    def __len__(self) -> int:
        return sum(self.counts)

    def rank_shards(self, rank: int, world: int) -> list[int]:
        """Indices of the shards rank `rank` of `world` reads."""
        return list(range(len(self.shards)))[rank::world]

    def __iter__(self) -> Iterator[tuple]:
        seed, shuffle, transform, rank, world = self.epoch
        mine = self.rank_shards(rank, world)
        if shuffle:
            mine = [mine[i] for i in np.random.default_rng(seed).permutation(len(mine))]
        info = get_worker_info()
        if info is not None:
            mine = mine[info.id::info.num_workers]
        for s in mine:
            try:
                for k, sample in enumerate(self.read(self.shards[s])):
                    key = sample_seed(seed, s * 1_000_003 + k)
                    try:
                        item = to_tensors(sample)
                        yield (seeded(transform, item, key) if transform else item), key
                    except SampleError as e:
                        yield Bad(str(e)), key
            except SampleError as e:
                yield Bad(str(e)), seed


class EpochSource(Protocol):
    """What `epoch_batches` reads of a dataset: `StreamedDataset` is the one. Named here as
    a protocol because that module imports this one to read itself (no import circle)."""

    sources: dict[str, Any]
    transforms: dict[str, Callable]
    batch_transforms: dict[str, Callable]
    options: LoaderOptions
    rank: int
    world: int
    node: str | None
    on_error: str
    _loaders: dict[tuple, tuple]

    def step_batch(self, split: str = "train") -> int: ...
    def plain_transform(self, split: str) -> Callable | None: ...
    def sample_ports(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]: ...
    def end_epoch(self, split: str, skipped: int, first: str | None,
                  bad: Sequence[str] = ()) -> None: ...


def epoch_batches(ds: EpochSource, split: str, shuffle: bool, seed: int,
                  batch_size: int | None = None, plain: bool = False
                  ) -> Iterator[dict[str, torch.Tensor]]:
    """One pass over `split` of `ds`: CPU batches, port -> tensor; with `plain`, without
    random augmentation (the training split gets the deterministic val/test transform)."""
    src = ds.sources[split]
    b = batch_size or ds.step_batch(split)
    transform = ds.plain_transform(split) if plain else ds.transforms.get(split)
    batch_transform = None if plain else ds.batch_transforms.get(split)
    opts = ds.options
    # no more workers than batches: a worker reads whole batches, the rest would idle
    workers = min(opts.worker_count(len(src)), -(-len(src) // max(b, 1)))
    collate_fn = partial(collate, ports=ds.sample_ports(), batch_transform=batch_transform)
    limit = None
    if isinstance(src, ShardSource):
        src.epoch = (seed, shuffle, transform, ds.rank, ds.world)
        if ds.world > 1:  # every rank must take the same number of steps, or DDP waits
            per_rank = [sum(src.counts[i] for i in src.rank_shards(r, ds.world))
                        for r in range(ds.world)]
            limit = max(1, min(per_rank) // b)
        loader: DataLoader = DataLoader(src, batch_size=b, collate_fn=collate_fn,
                                        num_workers=workers, pin_memory=opts.pin,
                                        **_worker_kwargs(opts, workers, False,
                                                         (src, transform, batch_transform)))
    else:
        key = (split, b, shuffle, ds.rank, ds.world, workers, plain)
        kept = ds._loaders.get(key)
        if kept is None:
            sampler = EpochBatches(len(src), b, shuffle, ds.rank, ds.world)
            loader = DataLoader(_Samples(src, transform), batch_sampler=sampler,
                                collate_fn=collate_fn, num_workers=workers, pin_memory=opts.pin,
                                generator=torch.Generator().manual_seed(0),
                                **_worker_kwargs(opts, workers, split == "train" and not plain,
                                                 (src, getattr(src, "dataset", None),
                                                  transform, batch_transform)))
            kept = sampler, loader
            ds._loaders[key] = kept
        sampler, loader = kept
        sampler.set_epoch(seed)
    skipped, first, named = 0, None, []
    for step, (batch, bad) in enumerate(_started(loader, workers), 1):
        if bad:
            if ds.on_error == "stop":
                raise SampleError(f"{ds.node or 'data'}: {bad[0]} (set on_error = skip to "
                                  "leave unreadable samples out)")
            skipped += len(bad)
            first = first or bad[0]
            named += bad
        if ds.world == 1 and len(next(iter(batch.values()))) == 0:
            continue  # every sample of it skipped
        yield batch
        if limit is not None and step >= limit:
            break
    ds.end_epoch(split, skipped, first, named)


def _started(loader: DataLoader, workers: int) -> Iterator:
    """An iterator over `loader`, its worker processes forked with the garbage collector's
    objects frozen: a worker's collector then never walks the objects it inherited, so it
    does not copy the parent's memory page by page (copy-on-write touched by reference
    counts and collections) — its memory stays its own batches, however long the epoch."""
    if workers == 0:
        return iter(loader)
    gc.freeze()
    try:
        return iter(loader)  # forks the workers (the first time, for persistent ones)
    finally:
        gc.unfreeze()


def _worker_kwargs(opts: LoaderOptions, workers: int, reusable: bool,
                   read: Iterable[Any] = ()) -> dict:
    """The DataLoader's worker arguments; `read` are the objects the workers unpickle (the
    fork server imports their modules once, ahead of every worker)."""
    if workers == 0:
        return {}
    persistent = opts.persistent_workers if opts.persistent_workers is not None else reusable
    out: dict[str, Any] = {"persistent_workers": persistent,
                           "worker_init_fn": partial(_worker_started, env=remote.storage_env())}
    method = start_method()
    if method is not None:
        out["multiprocessing_context"] = _context(method, read)
    if opts.prefetch_factor is not None:
        out["prefetch_factor"] = opts.prefetch_factor
    return out


def start_method() -> str | None:
    """How DataLoader workers start here: "fork" when the calling thread is the process's
    only Python thread (the CLI, a script: nothing pickled, nothing imported again, the
    fastest start); "forkserver" when other threads run (the editor, its training process,
    a notebook's kernel); None off Linux (the platform's default, spawn).

    Why not fork everywhere: a fork copies every lock as it is at that instant, and a lock
    another thread holds then is never released in the child. The editor's training process
    forked its workers while its message-reader thread sat in ``pickle.load(sys.stdin.buffer)``
    holding stdin's buffer lock; each worker then waited forever for that lock in
    multiprocessing's start-up (`multiprocessing.util._close_stdin`), and the run took no
    step (issue #32, seen with py-spy). A fork server is a process of its own with one
    thread; workers forked from it inherit no lock of ours, whatever our threads do."""
    if not sys.platform.startswith("linux"):
        return None
    here = threading.current_thread()
    others = [t for t in threading.enumerate() if t is not here and not _fork_safe(t)]
    return "forkserver" if others else "fork"


def _fork_safe(thread: threading.Thread) -> bool:
    """Threads a worker can be forked beside: those torch's own loaders start (a
    multiprocessing queue's feeder, whose queue makes its locks anew in a forked child;
    the pin-memory loop, whose queue no worker touches) — so the CLI's validation loader
    still forks beside the training loader's persistent workers."""
    return thread.name == "QueueFeederThread" or thread.name.endswith("(_pin_memory_loop)")


# what the fork server imports once, before it forks any worker (with the data's own modules)
_PRELOAD = ["torch", "numpy", "nodegraph.kinds.loading", "nodegraph.kinds.streamed",
            "nodegraph.kinds.worker_preload"]


def _context(method: str, read: Iterable[Any]) -> Any:
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":  # takes effect when the server starts (the first time)
        modules = {type(o).__module__ for o in read if o is not None}
        ctx.set_forkserver_preload(_PRELOAD + sorted(m for m in modules if m != "builtins"))
    return ctx


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _worker_started(_worker_id: int, env: dict[str, str] | None = None) -> None:
    """Run first in every worker: on Linux the kernel kills it the moment its parent (the
    process that reads it, or the fork server, which ends with that process) is gone, so a
    training process that is killed (by the editor after a Stop it did not obey, by the
    OOM killer) leaves no orphan worker. torch's own check of the parent runs only every
    5 s, and only between samples. `env`: the reading process's object-storage settings
    now (a fork server keeps those of when it started, `remote.storage_env`)."""
    if env is not None:
        remote.adopt_env(env)
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no libc to ask: torch's own check remains
        pass


def release_workers(datasets: Iterable[Any]) -> None:
    """End the worker processes the streamed datasets among `datasets` keep between epochs
    (their next read starts new ones): called when a run ends, so a stopped or finished
    run leaves no process behind."""
    for ds in datasets:
        loaders = getattr(ds, "_loaders", None)
        if not loaders:
            continue
        for _sampler, loader in loaders.values():
            stop_workers(loader)
        ds._loaders = {}


def stop_workers(loader: DataLoader) -> None:
    """Stop `loader`'s persistent workers now (not when the garbage collector gets to it)."""
    iterator = getattr(loader, "_iterator", None)
    if iterator is not None and hasattr(iterator, "_shutdown_workers"):
        iterator._shutdown_workers()
    loader._iterator = None

