"""Streamed data as code: the exported script reads the same files, per sample, in
DataLoader workers, in the order and with the random draws nodegraph uses.

A data block that streams (`nodegraph.kinds.streamed`) and can be written as code gives its
dataset a ``script`` attribute: a callable ``script(node) -> StreamScript`` (see
`nodegraph.kinds.streamed.StreamScript`) with the reader class it needs in the script, the
expression that makes each split's reader, the per-sample transforms as
torchvision.transforms.v2 expressions, and the arrays (file lists, labels) saved in the
.npz beside the script. This module adds what every streamed block shares: `Stream` (one
split: a seeded permutation cut into batches, each sample's transforms seeded from the
epoch's seed and the sample's index exactly as `nodegraph.kinds.loading` does, so with the
same seed the script's batches are nodegraph's, augmentation included), `Transforms` (the
per-sample chain on port x, labels one-hot when a batch step mixes them) and
`MixBatch` (MixUp/CutMix on a collated batch). Only the file list lives in the .npz; the
pixels are read from the files while training, so data larger than memory trains.
"""

from __future__ import annotations

from typing import Any

import torch

from nodegraph.interop.export.data import SPLITS, DataCode
from nodegraph.interop.export.syntax import LINE, call_lines
from nodegraph.kinds.loading import _MIX, LoaderOptions
from nodegraph.model.errors import NodegraphError
from nodegraph.runtime.compile import Compiled

STREAM = f'''\
def sample_seed(epoch_seed, index):
    """The seed of one sample's random transforms in one epoch (nodegraph's)."""
    return (epoch_seed ^ ((index + 1) * {_MIX:#x})) & ((1 << 63) - 1)


def seeded(fn, value, seed):
    """`fn(value)` with torch's CPU generator seeded; in the main process its state is
    restored after, so the data path does not move the model's random draws (dropout)."""
    cpu = torch.default_generator
    if torch.utils.data.get_worker_info() is not None:
        cpu.manual_seed(seed)
        return fn(value)
    state = cpu.get_state()
    try:
        cpu.manual_seed(seed)
        return fn(value)
    finally:
        cpu.set_state(state)


class Transforms:
    """One split's per-sample transforms on x, in order; then labels one-hot over
    `onehot` classes (when a batch step mixes labels) and x flattened when `flat`."""

    def __init__(self, steps, onehot=None, flat=False):
        self.steps, self.onehot, self.flat = steps, onehot, flat

    def __call__(self, sample):
        x, y = sample["x"], sample["y"]
        for step in self.steps:
            x = step(x)
        if self.onehot is not None:
            y = torch.nn.functional.one_hot(y.long(), self.onehot).to(torch.float32)
        return {{**sample, "x": x.reshape(-1) if self.flat else x, "y": y}}


class MixBatch:
    """One of the batch steps (MixUp, CutMix), drawn per batch, on a batch's x and y."""

    def __init__(self, steps):
        self.steps = steps

    def __call__(self, batch):
        k = int(torch.randint(len(self.steps), ())) if len(self.steps) > 1 else 0
        x, y = self.steps[k](batch["x"], batch["y"].long())
        return {{**batch, "x": x, "y": y.to(torch.float32)}}


class Seeded(torch.utils.data.Dataset):
    """A reader whose samples are transformed under their own seed: keys (index, seed)."""

    def __init__(self, reader, transform):
        self.reader, self.transform = reader, transform

    def __len__(self):
        return len(self.reader)

    def __getitem__(self, key):
        index, seed = key
        sample = self.reader[index]
        if self.transform is not None:
            sample = seeded(self.transform, sample, seed)
        return sample, seed


class EpochOrder(torch.utils.data.Sampler):
    """An epoch's batches of (index, seed) keys: a permutation drawn from the epoch's seed."""

    def __init__(self, n, size, shuffle):
        self.n, self.size, self.shuffle, self.seed = n, size, shuffle, 0

    def __len__(self):
        return -(-self.n // self.size)

    def __iter__(self):
        if self.shuffle and self.n > 1:
            order = torch.randperm(self.n, generator=torch.Generator().manual_seed(self.seed))
        else:
            order = torch.arange(self.n)
        for i in range(0, self.n, self.size):
            yield [(j, sample_seed(self.seed, j)) for j in order[i:i + self.size].tolist()]


class Collate:
    """Samples stacked per port, then the batch transform seeded by the first sample's seed
    (an object of its own: workers started by spawn receive it pickled)."""

    def __init__(self, batch_transform):
        self.batch_transform = batch_transform

    def __call__(self, items):
        batch = {{k: torch.stack([s[k] for s, _ in items]) for k in items[0][0]}}
        if self.batch_transform is not None:
            batch = seeded(self.batch_transform, batch, items[0][1])
        return batch


class Stream:
    """One split read per sample by `workers` DataLoader workers, as nodegraph streams it:
    each epoch draws a seed from the shuffle generator (0 without one), which orders the
    samples and seeds every sample's transforms. Batches are at most `limit` samples (the
    training batch: evaluation reads no larger ones)."""

    def __init__(self, reader, transform, limit, shuffle, workers, batch_transform=None,
                 normalization=None):
        self.samples = Seeded(reader, transform)
        self.limit, self.shuffle, self.workers = limit, shuffle, workers
        self.batch_transform = batch_transform
        # port -> (centre, scale) fitted on the training split: batches scaled as they come
        self.normalization = normalization or {{}}
        self.loaders = {{}}  # per batch size, kept: persistent workers live across epochs

    def __len__(self):
        return len(self.samples)

    def batches(self, batch_size, generator=None):
        n = len(self.samples)
        size = min(n if batch_size == 0 else batch_size, self.limit)
        seed = 0 if generator is None else int(torch.randint(0, 2**62, (1,), generator=generator))
        if size not in self.loaders:
            order = EpochOrder(n, size, self.shuffle and generator is not None)
            extra = {{"persistent_workers": True}} if self.workers else {{}}
            self.loaders[size] = order, torch.utils.data.DataLoader(
                self.samples, batch_sampler=order, collate_fn=Collate(self.batch_transform),
                num_workers=self.workers, generator=torch.Generator().manual_seed(0), **extra)
        order, loader = self.loaders[size]
        order.seed = seed
        for batch in loader:
            batch = {{port: t.to(DEVICE) for port, t in batch.items()}}
            for port, (centre, scale) in self.normalization.items():
                batch[port] = (batch[port] - centre.to(DEVICE)) / scale.to(DEVICE)
            yield batch'''

# what `batches` does first when data streams
BATCHES_STREAMED = '''\
    if isinstance(part, Stream):  # read per sample by DataLoader workers
        yield from part.batches(batch_size, generator)
        return
'''


def stream_code(compiled: Compiled, node: str, function: str, npz_name: str,
                opts: dict) -> DataCode | str:
    """The load function of streamed data block `node`, or why it cannot be written."""
    ds: Any = compiled.datasets[node]  # a StreamedDataset
    script = getattr(ds, "script", None)
    if script is None:
        return ("a streamed data block of this kind has no script form yet; set its storage "
                "to memory (without random augmentation) to export its tensors")
    if ds.dtype not in (None, torch.float32):
        return (f"streamed data in {ds.dtype} has no script form yet; train it in float32 "
                "to export it")
    try:
        s = script(node)
    except NodegraphError as e:
        return str(e)
    spec = compiled.report.specs[node]
    workers = LoaderOptions.of(opts, "cpu").worker_count(ds.size("train"))
    present = [split for split in SPLITS if ds.has(split)]
    v2 = bool(s.batch_steps) or any(t is not None and t[0] for t in s.transforms.values())
    lines = [f"def {function}():",
             f'    """{spec.id} \'{node}\': each split read per sample by DataLoader workers '
             "from the",
             "    files it names (which files or rows: in the .npz beside this script), "
             'as nodegraph reads it."""']
    if v2:  # imported once torchvision can be (see `export.packages`)
        lines += ["    load_torchvision()", "    from torchvision.transforms import v2", ""]
    lines += ["    readers, transforms = {}, {}",
              f'    with np.load(Path(__file__).with_name("{npz_name}")) as arrays:']
    for split in present:
        callee, args = s.readers[split]
        lines += call_lines(f'readers["{split}"]', callee, args, 8)
    for split in present:
        t = s.transforms.get(split)
        if t is None:
            lines.append(f'    transforms["{split}"] = None')
            continue
        steps, onehot, flat = t
        lines += _list_lines(f'{split}_steps', steps, 4)
        lines.append(f'    transforms["{split}"] = Transforms({split}_steps, {onehot!r}, '
                     f"{flat!r})")
    if s.batch_steps:
        lines += _list_lines("mix", s.batch_steps, 4)
        lines.append("    mix = MixBatch(mix)  # the training batches' MixUp / CutMix")
    arrays = dict(s.arrays)
    extra = []
    if ds.normalization:  # fitted by nodegraph on the training split: saved, applied per batch
        lines.append("    with np.load(Path(__file__).with_name("
                     f'"{npz_name}")) as arrays:')
        lines.append("        scaled = {")
        for port, st in ds.normalization.items():
            for k in ("centre", "scale"):
                arrays[f"{node}/normalization/{port}/{k}"] = st[k].float().cpu().numpy()
            lines.append(f'            "{port}": (torch.from_numpy(arrays["{node}/normalization/'
                         f'{port}/centre"]),')
            lines.append(f'                  torch.from_numpy(arrays["{node}/normalization/'
                         f'{port}/scale"])),')
        lines.append("        }")
        extra.append("normalization=scaled")
    head = (f"    return {{split: Stream(reader, transforms[split], {ds.step_batch('train')}, "
            f"{bool(ds.shuffle)}, {workers}")
    mix = ['mix if split == "train" else None'] if s.batch_steps else \
        (["None"] if extra else [])
    rest = ", ".join(mix + extra)
    lines += ([head + ",", f"                          {rest})"] if rest else [head + ")"])
    lines.append("            for split, reader in readers.items()}")
    imports = [("numpy", "", "np"), ("torch", "", ""), ("pathlib", "Path", ""), *s.imports]
    return DataCode(node, function, "\n".join(lines), imports, arrays,
                    definitions=[*s.definitions], torchvision=v2)


def _list_lines(name: str, items: list[str], indent: int) -> list[str]:
    """``name = [a, b]``, one item a line when they do not fit on one."""
    pad = " " * indent
    one = f"{pad}{name} = [{', '.join(items)}]"
    if len(one) <= LINE:
        return [one]
    head = f"{pad}{name} = ["
    return [head + items[0] + ",", *(" " * len(head) + i + "," for i in items[1:-1]),
            " " * len(head) + items[-1] + "]"]
