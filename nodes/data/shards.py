"""WebDataset tar shards: samples stored as groups of files in many .tar archives.

The WebDataset convention: a shard is a plain tar file whose members are named
`KEY.EXT`; the members that share a KEY form one sample, each EXT one field
(`000042.npy`, `000042.cls`). Data that lives on many machines is kept this way because a
shard is read start to end, never seeked into, and shards are dealt out whole: streamed
(`storage` stream, or more than memory holds), each rank under DDP, and inside it each
DataLoader worker, reads its own shards (`nodegraph.kinds.loading.ShardSource`).

Fields are decoded by extension with libraries, never by hand: `.npy` with numpy (pickles
refused), `.cls` / `.txt` / `.index` as an integer or number, images (`.png`, `.jpg`,
`.jpeg`, `.webp`, `.bmp`, `.tif`) with Pillow into float (C, H, W) in [0, 1].

Validation reads the tar headers (how many samples each shard holds, and that no member
runs past the file's end: a truncated shard is named) and decodes the first sample for
its shapes; the other samples are read when training reads them.
"""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nodegraph.kinds import gate, remote
from nodegraph.kinds.datameta import DataMeta, sized
from nodegraph.kinds.dataset import DataParams, data_params, data_path, from_arrays
from nodegraph.kinds.declare import data
from nodegraph.kinds.loading import ShardSource
from nodegraph.kinds.streamed import STORAGE_PARAM, SampleError
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import Port, bool_param, choice_param, str_param
from nodes.data._images import decode as decode_image
from nodes.data._images import to_array
from nodes.data._streaming import (
    Rows,
    everything,
    held_bytes,
    in_memory,
    mark,
    split_rows,
    streamed,
)

IMAGES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff")
NUMBERS = (".cls", ".txt", ".index", ".id", ".label")
Shard = Path | str  # a local file, or an object's URL (s3://bucket/shards/train-000.tar)
MAX_FIELD = 256 * 2**20  # one field larger than this is refused, not read into memory


def expand(pattern: str) -> list[Shard]:
    """The shard files a param names: a .tar file, a folder (its .tar files), a brace range
    `train-{000..009}.tar` (WebDataset's notation; at most `gate.MAX_BRACE_NAMES` names) or
    a glob; sorted. Every shard, and every folder a glob passes through, goes through the
    file gate (`nodegraph.kinds.gate`): one behind a symlink that leads outside is refused."""
    if not pattern:
        return []
    if remote.is_url(pattern):
        return _expand_remote(pattern)
    found = gate.brace_range(pattern, "shard")
    if found is None:
        where = data_path(pattern)
        if where.is_dir():
            found = gate.listing(where, "shard", lambda n: n.endswith(".tar"))
        elif any(c in pattern for c in "*?["):
            found = gate.matching(pattern, "shard")
        else:
            gate.check(where, "shard", shown=f"{where}' (from '{pattern}")
            found = [where]
    if not found:
        raise NodegraphError(f"'{pattern}' names no .tar shards")
    return list[Shard](found)


def _expand_remote(pattern: str) -> list[Shard]:
    """`expand` for shards in object storage (`nodegraph.kinds.remote`): a brace range is
    checked against one listing of its prefix, a folder is listed, a glob matched in the
    last part; every key stays under the allowed prefix."""
    m = gate.BRACES.search(pattern)
    found: list[Shard]
    if m is not None:
        lo, hi, width = int(m.group(1)), int(m.group(2)), len(m.group(1))
        if not 0 < hi - lo + 1 <= gate.MAX_BRACE_NAMES or "/" in pattern[m.end():]:
            raise NodegraphError(f"shard range '{pattern}' runs backwards, names more than "
                                 f"{gate.MAX_BRACE_NAMES:,} shards or is not in the file name")
        names = [pattern[:m.start()] + str(i).zfill(width) + pattern[m.end():]
                 for i in range(lo, hi + 1)]
        parent = remote.normal(names[0], "shard").rpartition("/")[0]
        present = set(remote.listing(parent, "shard"))
        missing = [n for n in names if remote.normal(n, "shard") not in present]
        if missing:
            raise NodegraphError(f"shard '{missing[0]}' (from '{pattern}') does not exist")
        found = [remote.normal(n, "shard") for n in names]
    elif any(c in pattern for c in "*?["):
        found = list(remote.matching(pattern, "shard"))
    elif remote.is_folder(pattern, "shard"):
        found = list(remote.listing(pattern, "shard", lambda n: n.endswith(".tar")))
    else:
        remote.info(pattern, "shard")
        found = [remote.normal(pattern, "shard")]
    if not found:
        raise NodegraphError(f"'{pattern}' names no .tar shards")
    return found


@contextlib.contextmanager
def _open(shard: Shard) -> Iterator[tuple[Any, int]]:
    """`shard` open for reading, and its size: a local file through the file gate, an
    object through `nodegraph.kinds.remote`."""
    if isinstance(shard, str) and remote.is_url(shard):
        f, size = remote.open_file(shard, "shard")
        with f:
            yield f, size
        return
    with gate.open_file(Path(shard), "shard") as f:
        yield f, os.fstat(f.fileno()).st_size


def _split_name(name: str) -> tuple[str, str]:
    """(key, .ext) of a member: the key is the path up to the first dot of the file name."""
    folder, _, base = name.rpartition("/")
    stem, dot, ext = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), (dot + ext).lower()


def scan(shard: Shard, fields: tuple[str, str]) -> list[str]:
    """The keys of the samples of `shard` that have both fields, from its headers alone;
    a shard cut short (a member running past the end, or stray bytes after the last one)
    is refused, naming it."""
    return scan_all(shard, fields)[0]


def scan_all(shard: Shard, fields: tuple[str, str]) -> tuple[list[str], list[dict[str, str]]]:
    """`scan`'s keys, and the samples `samples` will leave out: those with one of the two
    fields but not the other, each as {"file": "shard:key", "reason": ...}."""
    with _open(shard) as (f, size):
        keys, end, partial = _keys(f, shard, size, fields)
        f.seek(end)  # after the last member: padding, end blocks, or nothing
        rest = f.read(1 << 16)
    if rest.strip(b"\0"):
        raise NodegraphError(f"shard '{shard}' is truncated or corrupt after byte {end:,}")
    return keys, [{"file": f"{shard}:{key}", "reason": f"shard '{shard}': sample '{key}' "
                   f"has no '{lacks}' field"} for key, lacks in partial]


def _keys(f, shard: Shard, size: int, fields: tuple[str, str]
          ) -> tuple[list[str], int, list[tuple[str, str]]]:
    """The keys `scan` gives, where the last member ends, and (key, missing field) of each
    incomplete sample, from the open shard `f`."""
    keys: list[str] = []
    partial: list[tuple[str, str]] = []
    key_now, have = None, set[str]()
    end = 0

    def close() -> None:  # the sample of `key_now` ends: one field without the other?
        if have and key_now is not None:
            partial.append((key_now, next(x for x in fields if x not in have)))

    try:
        with tarfile.open(fileobj=f, mode="r:") as tar:
            for member in tar:
                tar.members = []  # type: ignore[attr-defined]  # tarfile keeps each header
                if not member.isfile():
                    continue
                end = member.offset_data + member.size
                if end > size:
                    raise NodegraphError(f"shard '{shard}' is truncated: member "
                                         f"'{member.name}' runs past the end of the file")
                key, ext = _split_name(member.name)
                if key != key_now:  # as `samples` groups them: consecutive members
                    close()
                    key_now, have = key, set()
                if ext in fields and ext not in have:
                    have.add(ext)
                    if len(have) == len(fields):
                        keys.append(key)
                        have = set()
            close()
    except (tarfile.TarError, OSError, EOFError) as e:
        raise NodegraphError(f"shard '{shard}' is truncated or not a tar file ({e})") from None
    return keys, end, partial


def decode(name: str, ext: str, raw: bytes, where: str) -> np.ndarray:
    """One field's value as an array, decoded by its extension."""
    try:
        if ext.endswith(".npy"):
            return np.load(io.BytesIO(raw), allow_pickle=False)  # gated: bytes of a tar member
        if ext in NUMBERS:
            value = float(raw.decode("utf-8").strip())
            return np.asarray(int(value) if value.is_integer() else value)
        if ext in IMAGES:  # the image readers' one decoder, bomb guard and all
            return to_array(decode_image(raw, f"{where}: {name}"))
    except SampleError as e:
        raise NodegraphError(str(e)) from None
    except Exception as e:  # numpy, Pillow and UTF-8 errors: the field is named
        raise NodegraphError(f"shard '{where}': cannot decode '{name}': {e}") from None
    raise NodegraphError(f"shard '{where}': no decoder for '{name}' (fields: .npy, "
                         f"{', '.join(NUMBERS)}, images)")


def samples(shard: Shard, fields: tuple[str, str]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The (x, y) of each sample of `shard` in order, read start to end."""
    # a sample's members lie together in the tar (WebDataset writes them so): only the
    # current key's fields are kept, so a sample missing a field costs nothing later
    key_now, got = None, dict[str, Any]()
    try:
        with _open(shard) as (f, _), tarfile.open(fileobj=f, mode="r:") as tar:
            for member in tar:
                tar.members = []  # type: ignore[attr-defined]  # as in `_keys`
                if not member.isfile():
                    continue
                key, ext = _split_name(member.name)
                if ext not in fields:
                    continue
                if member.size > MAX_FIELD:
                    raise NodegraphError(f"shard '{shard}': '{member.name}' is larger than "
                                         f"{MAX_FIELD >> 20} MB")
                if key != key_now:
                    key_now, got = key, {}
                handle = tar.extractfile(member)
                if handle is None:  # a regular file has one
                    continue
                raw = handle.read()
                got[ext] = decode(member.name, ext, raw, str(shard))
                if len(got) == 2:
                    yield got[fields[0]], got[fields[1]]
                    got = {}
    except (tarfile.TarError, OSError, EOFError) as e:
        raise NodegraphError(f"shard '{shard}' cannot be read: {e}") from None


@dataclass
class ShardSet:
    """The shards of each split, with their sample counts (from the headers)."""

    shards: dict[str, list[Shard]]
    counts: dict[str, list[int]]
    fields: tuple[str, str]
    # samples left out for missing a field ({"file": "shard:key", "reason"}), named, never
    # dropped in silence (issue #37): a warning at validation, an error with `strict`
    incomplete: list[dict[str, str]]

    def size(self, split: str) -> int:
        return sum(self.counts.get(split, ()))


def shard_set(p: WebDatasetParams) -> ShardSet:
    x, y = ("." + f.strip().lstrip(".").lower() for f in (p.x_field, p.y_field))
    fields = (x, y)
    if fields[0] == fields[1]:
        raise NodegraphError(f"x_field and y_field are both '{fields[0]}'")
    given = {"train": p.shards, "val": p.val_shards, "test": p.test_shards}
    shards = {s: expand(pattern) for s, pattern in given.items() if pattern}
    if "train" not in shards:
        raise NodegraphError("no training shards given (shards)")
    scanned = {s: [scan_all(f, fields) for f in files] for s, files in shards.items()}
    counts = {s: [len(keys) for keys, _ in found] for s, found in scanned.items()}
    incomplete = [bad for found in scanned.values() for _, bads in found for bad in bads]
    if sum(counts["train"]) == 0:
        raise NodegraphError(f"the shards '{p.shards}' hold no sample with both a "
                             f"'{fields[0]}' and a '{fields[1]}' field")
    if incomplete and p.strict:
        raise NodegraphError(f"{_incomplete(incomplete, sum(map(sum, counts.values())))} "
                             "(strict = true: unset it to train on the complete samples)")
    return ShardSet(shards, counts, fields, incomplete)


def _incomplete(bad: list[dict[str, str]], kept: int) -> str:
    """One line counting the incomplete samples, naming the first few."""
    names = ", ".join(b["reason"].split(": ", 1)[1] for b in bad[:3])
    more = f" and {len(bad) - 3:,} more" if len(bad) > 3 else ""
    return (f"{len(bad):,} sample{'s' if len(bad) != 1 else ''} of the shards miss a field "
            f"and are left out ({kept:,} complete ones read): {names}{more}")


def first_sample(sset: ShardSet) -> tuple[np.ndarray, np.ndarray]:
    for shard, n in zip(sset.shards["train"], sset.counts["train"], strict=True):
        if n:
            return next(samples(shard, sset.fields))
    raise NodegraphError("the training shards hold no samples")


def _ports(x: np.ndarray, y: np.ndarray, kind: str, where: str) -> dict:
    if x.dtype.kind not in "biuf":
        raise NodegraphError(f"shards '{where}': x holds {x.dtype}, not numbers")
    if kind == "class":
        if y.size != 1 or y.dtype.kind not in "biu":
            raise NodegraphError(f"shards '{where}': a class target is one whole number per "
                                 f"sample, the first holds {y.dtype} {y.shape}")
        return {"x": (x.shape or (1,), torch.float32), "y": ((), torch.int64)}
    return {"x": (x.shape or (1,), torch.float32), "y": ((max(y.size, 1),), torch.float32)}


def _fixed(p: WebDatasetParams, sset: ShardSet) -> bool:
    """Whether the shard sets fix the splits (val or test shards given)."""
    return len(sset.shards) > 1


class WebDatasetParams(DataParams):
    shards: str
    val_shards: str
    test_shards: str
    x_field: str
    y_field: str
    target_kind: str
    storage: str
    strict: bool


def shards_meta(p: WebDatasetParams) -> DataMeta | None:
    sset = shard_set(p)
    x, y = first_sample(sset)
    ports = _ports(x, y, p.target_kind, p.shards)
    if _fixed(p, sset):
        meta = mark(DataMeta(ports, {s: sset.size(s) for s in sset.shards if sset.size(s)},
                             p.batch_size), p)
    else:
        meta = mark(sized(ports, sset.size("train"), p), p)
    if meta is None or not sset.incomplete:
        return meta
    kept = sum(map(sum, sset.counts.values()))
    return replace(meta, warnings=(*meta.warnings, _incomplete(sset.incomplete, kept)))


class TarShards(ShardSource):
    """The samples of one split, read shard by shard in DataLoader workers (each rank and
    worker its own shards, `nodegraph.kinds.loading.ShardSource`); with the split params
    dividing the training shards, `rows` says which samples of each shard are this
    split's."""

    def __init__(self, shards: list[Shard], rows: Rows, fields: tuple[str, str], ports: dict,
                 kind: str):
        super().__init__(shards, rows.counts)
        self.rows, self.fields, self.ports, self.kind = rows, fields, ports, kind
        self.index = {str(f): k for k, f in enumerate(shards)}

    def read(self, shard: Shard) -> Iterator[dict]:
        keep = set(self.rows.pick(self.index[str(shard)]).tolist())
        try:
            for i, (x, y) in enumerate(samples(shard, self.fields)):
                if i in keep:
                    yield _sample(x, y, self.ports, self.kind, shard)
        except NodegraphError as e:
            raise SampleError(str(e)) from None


def _class_label(y: np.ndarray, shard: Shard) -> int:
    """A sample's class label as an int64's value; refused, naming the shard, when it is
    not one (a label past 64 bits made numpy an object array, which astype refused)."""
    try:
        label = int(np.asarray(y).reshape(-1)[0])
        if not -2**63 <= label < 2**63:
            raise OverflowError(f"{label} does not fit in 64 bits")
    except (ValueError, OverflowError, TypeError, IndexError) as e:
        raise SampleError(f"shard '{shard}': a sample's class label is not a whole number "
                          f"({e})") from None
    return label


def _sample(x: np.ndarray, y: np.ndarray, ports: dict, kind: str, shard: Shard) -> dict:
    """One sample as the ports declare it; a sample of another shape is refused, named."""
    if (x.shape or (1,)) != ports["x"][0]:
        raise SampleError(f"shard '{shard}': a sample's x is {x.shape}, the first sample's "
                          f"{ports['x'][0]}")
    xt = torch.from_numpy(np.asarray(x, np.float32).reshape(ports["x"][0]))
    if kind == "class":
        return {"x": xt, "y": torch.tensor(_class_label(y, shard))}
    return {"x": xt, "y": torch.from_numpy(np.asarray(y, np.float32).reshape(-1))}


def _streamed_shards(p: WebDatasetParams, sset: ShardSet, ports: dict):
    if _fixed(p, sset):
        parts = {s: (files, everything(sset.counts[s])) for s, files in sset.shards.items()}
    else:
        rows = split_rows(sset.size("train"), p)
        parts = {s: (sset.shards["train"], Rows(r, sset.counts["train"]))
                 for s, r in rows.items() if len(r)}
    sources = {s: TarShards(files, rows, sset.fields, ports, p.target_kind)
               for s, (files, rows) in parts.items()}
    train = sources["train"]
    fit = (sample for f in train.shards for sample in train.read(f))
    dataset = streamed(sources, ports, p, fit)
    dataset.refused = list(sset.incomplete)  # type: ignore[attr-defined]  # in the history
    return dataset


def shards_dataset(p: WebDatasetParams):
    """The shard sets as the splits (or the training samples split by the params), read
    at once into memory or streamed shard by shard, as `storage` and the size say."""
    sset = shard_set(p)
    ports = _ports(*first_sample(sset), p.target_kind, p.shards)
    nbytes = held_bytes(ports, sum(sset.size(s) for s in sset.shards))
    stratified = not _fixed(p, sset) and p.split == "stratified"  # needs the labels
    if not stratified and not in_memory(p, nbytes):
        return _streamed_shards(p, sset, ports)
    xs, ys, rows, start = [], [], {}, 0
    for split, files in sset.shards.items():
        for shard in files:
            for x, y in samples(shard, sset.fields):
                if (x.shape or (1,)) != ports["x"][0]:
                    raise NodegraphError(f"shard '{shard}': a sample's x is {x.shape}, the "
                                         f"first sample's {ports['x'][0]}")
                xs.append(np.asarray(x, np.float32).reshape(ports["x"][0]))
                ys.append(np.asarray(_class_label(y, shard), np.int64)
                          if p.target_kind == "class" else y)  # (fuzz webdataset 8844 363)
        rows[split] = np.arange(start, len(xs))
        start = len(xs)
    y_all = np.stack(ys)
    y_all = (y_all.reshape(-1).astype(np.int64) if p.target_kind == "class"
             else y_all.reshape(len(ys), -1).astype(np.float32))
    given = ({s: rows.get(s, np.zeros(0, np.int64)) for s in ("train", "val", "test")}
             if _fixed(p, sset) else None)
    dataset = from_arrays({"x": np.stack(xs), "y": y_all}, p, given_splits=given)
    dataset.skips = list(sset.incomplete)  # type: ignore[attr-defined]  # in the history
    return dataset


STRICT = bool_param("strict", False, "refuse shards with samples that miss a field (else "
                    "they are left out, counted at validation and named in the history)")
TARGET_KIND = choice_param("target_kind", ("class", "value"), "class",
                           "class: y is one class index per sample; value: float values")

BLOCKS = [
    data("data.WebDataset", "Samples from WebDataset tar shards (KEY.npy + KEY.cls, ...).\n\n"
         "Each shard is a tar file; the members sharing a key form one sample, x and y "
         "read from the fields `x_field` and `y_field` (.npy arrays, .cls/.txt numbers, "
         ".png/.jpg images decoded with Pillow). `shards` names the training shards — a "
         "file, a folder, a brace range train-{000..009}.tar or a glob — and `val_shards`, "
         "`test_shards` their own splits (else the split params divide the training "
         "samples). Validation reads the tar headers and the first sample only.",
         shards_dataset, meta=shards_meta,
         outputs=[Port("x", doc="the x field of each sample, float32"),
                  Port("y", doc="the y field: class indices (N,) int64, or values float32")],
         params=[str_param("shards", doc="the training shards: a .tar, a folder, "
                           "name-{000..009}.tar or a glob"),
                 str_param("val_shards", "", "shards of the validation split (optional)"),
                 str_param("test_shards", "", "shards of the test split (optional)"),
                 str_param("x_field", "npy", "the extension of the field that forms x"),
                 str_param("y_field", "cls", "the extension of the field that forms y"),
                 TARGET_KIND, STORAGE_PARAM, STRICT, *data_params(val_fraction=0.0)],
         keywords=("webdataset", "wds", "tar", "shards", "streaming", "file")),
]
