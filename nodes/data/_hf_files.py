"""The files of a Hugging Face `save_to_disk` folder, checked before `datasets` opens them.

`datasets.load_from_disk` trusts the folder: it joins each ``state.json``
``_data_files[].filename`` (and each split a ``dataset_dict.json`` names) to the folder
unchecked, so ``../`` or an absolute name reads Arrow data from anywhere, and a FIFO among
the files blocks it. Before `datasets` sees a folder, `load` reads those JSON
files itself through the file gate (`nodegraph.kinds.gate`: regular files, at most
`MAX_JSON` bytes) and refuses a split or data file that is not a plain name inside the
folder, or that the gate refuses (a symlink leading outside, a FIFO, a device).

`load` then builds the `Dataset` itself instead of `datasets.load_from_disk`, which would
open each Arrow file again by its name after the check (a file swapped in between would be
read): each Arrow file is opened once through the gate (``O_NOFOLLOW``, `fstat`), its
descriptor memory-mapped, and pyarrow reads the IPC stream from that map. `datasets` gets
the tables, never a path; the data stays mapped, not read into memory.

A folder in object storage (``s3://bucket/prefix``, `nodegraph.kinds.remote`) is read the
same way: its JSON through `remote.read_bytes` (bounded), each name checked, each Arrow
object copied once into an unlinked temporary file (on the local disk, gone when the
table is) and mapped from there, as `datasets.load_from_disk` with ``storage_options``
would download it; a DataLoader worker started by a fork server copies it again.
"""

from __future__ import annotations

import json
import mmap
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from nodegraph.kinds import gate, remote
from nodegraph.model.errors import NodegraphError
from nodegraph.model.sanitize import clean

MAX_JSON = 10 * 2**20  # a save_to_disk JSON file (features, file names): a few KB in practice
DICT_JSON, STATE_JSON, INFO_JSON = "dataset_dict.json", "state.json", "dataset_info.json"


Where = Path | str  # a folder on disk, or a URL


def _child(folder: Where, name: str) -> Where:
    return f"{folder}/{name}" if isinstance(folder, str) else folder / name


def _json(path: Where, shown: str) -> Any:
    raw = (remote.read_bytes(path, "datasets file", MAX_JSON)  # gated: remote, size-capped
           if isinstance(path, str)
           else gate.read_bytes(path, "datasets file", MAX_JSON, shown=shown))
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise NodegraphError(f"datasets file '{clean(shown)}' is not JSON: {e}") from None
    except RecursionError:
        raise NodegraphError(f"datasets file '{clean(shown)}' nests too deep") from None


def _plain(name: object, folder_shown: str, field: str) -> str:
    """`name` when it names an entry inside the folder (relative, no ``..``), else refused."""
    text = name if isinstance(name, str) else ""
    parts = PurePosixPath(text.replace("\\", "/")).parts
    if not text or "\x00" in text or text.startswith(("/", "\\")) or ".." in parts \
            or (len(text) > 1 and text[1] == ":"):
        raise NodegraphError(f"datasets folder '{clean(folder_shown)}': {field} "
                             f"{clean(repr(name))[:200]} is not a file name inside the folder; "
                             "a saved dataset reads only its own files")
    return text


def _check(path: Where, shown: str, want: str = "file") -> None:
    """`path` passes the file gate (a URL: allowed, of kind `want`), or is refused."""
    if isinstance(path, str):
        remote.info(path, f"datasets {want}", want=want)
    else:
        gate.check(path, f"datasets {want}", want=want, shown=shown)


def _dataset(folder: Where, shown: str) -> tuple[dict, Any, list[str]]:
    """A saved `Dataset` folder: its JSON read and its Arrow files checked; (state, info,
    the data files' names)."""
    state = _json(_child(folder, STATE_JSON), f"{shown}/{STATE_JSON}")
    info = _json(_child(folder, INFO_JSON), f"{shown}/{INFO_JSON}")
    files = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(files, list) or not files:
        raise NodegraphError(f"datasets file '{clean(shown)}/{STATE_JSON}' lists no data "
                             "files (_data_files)")
    names = []
    for k, entry in enumerate(files):
        name = _plain(entry.get("filename") if isinstance(entry, dict) else None, shown,
                      f"_data_files[{k}].filename")
        _check(_child(folder, name), f"{shown}/{name}")
        names.append(name)
    return state, info, names


def _holds(folder: Where) -> set[str]:
    """Which of the save_to_disk JSON files `folder` holds (a symlink counts: the gate
    judges it when it is read)."""
    if isinstance(folder, str):
        return {u.rpartition("/")[2] for u in remote.listing(folder, "datasets folder")
                } & {STATE_JSON, INFO_JSON, DICT_JSON}
    return {n for n in (STATE_JSON, INFO_JSON, DICT_JSON)
            if (folder / n).exists() or (folder / n).is_symlink()}


def load(folder: Where, shown: str) -> Any:
    """The `Dataset` or `DatasetDict` saved in `folder` (as `datasets.load_from_disk` builds
    it), each file read through the gate (`_dataset`'s checks, then `_table`); a
    folder of neither kind is FileNotFoundError, for the caller to say so. `folder` may
    be a URL (object storage)."""
    if isinstance(folder, str):
        folder = remote.normal(folder, "datasets folder")
        if not remote.is_folder(folder, "datasets folder"):
            raise FileNotFoundError(shown)
    else:
        gate.check(folder, "datasets folder", want="folder", shown=shown)
    holds = _holds(folder)
    if holds & {STATE_JSON, INFO_JSON}:
        return _build(folder, shown)
    if DICT_JSON not in holds:
        raise FileNotFoundError(shown)
    import datasets

    doc = _json(_child(folder, DICT_JSON), f"{shown}/{DICT_JSON}")
    splits = doc.get("splits") if isinstance(doc, dict) else None
    if not isinstance(splits, list):
        raise NodegraphError(f"datasets file '{clean(shown)}/{DICT_JSON}' lists no splits")
    out = {}
    for split in splits:
        name = _plain(split, shown, "split")
        _check(_child(folder, name), f"{shown}/{name}", want="folder")
        out[name] = _build(_child(folder, name), f"{shown}/{name}")
    return datasets.DatasetDict(out)


def _build(folder: Where, shown: str) -> Any:
    """One saved `Dataset`, as `datasets.Dataset.load_from_disk` builds it from the state,
    the info and the tables, but from tables read through the gate."""
    import datasets
    from datasets.table import InMemoryTable, concat_tables

    state, info, names = _dataset(folder, shown)
    tables = [InMemoryTable(_table(_child(folder, name), f"{shown}/{name}")) for name in names]
    split = state.get("_split")
    try:
        dataset = datasets.Dataset(
            arrow_table=concat_tables(tables), split=None if split is None else
            datasets.Split(split), fingerprint=state.get("_fingerprint"),
            info=datasets.DatasetInfo.from_dict(info if isinstance(info, dict) else {}))
        return dataset.with_format(
            type=state.get("_format_type"), columns=state.get("_format_columns"),
            output_all_columns=bool(state.get("_output_all_columns", False)),
            **(state.get("_format_kwargs") or {}))
    except NodegraphError:
        raise
    except Exception as e:  # features that do not fit the tables, a bad format: any kind
        raise NodegraphError(f"datasets folder '{clean(shown)}': {e}") from None


def _copied(url: str, shown: str) -> mmap.mmap:
    """Object `url` copied into an unlinked temporary file (removed when its map is) and
    mapped; refused when the local disk has not room for it."""
    f, size = remote.open_file(url, "datasets file")
    with f, tempfile.TemporaryFile(prefix="nodegraph-hf-") as copy:
        free = shutil.disk_usage(tempfile.gettempdir()).free
        if size > free:
            raise NodegraphError(f"datasets file '{clean(shown)}' is {size:,} bytes; the "
                                 f"temporary folder has {free:,} free (set TMPDIR)")
        shutil.copyfileobj(f, copy, 8 * 2**20)
        copy.flush()
        try:
            return mmap.mmap(copy.fileno(), 0, access=mmap.ACCESS_READ)  # gated: our temp copy
        except (ValueError, OSError) as e:  # an empty object cannot be mapped
            raise NodegraphError(f"datasets file '{clean(shown)}' cannot be read as Arrow "
                                 f"data: {e}") from None


def _table(path: Where, shown: str) -> Any:
    """The Arrow IPC stream in `path`, memory-mapped from the descriptor the gate opened
    (never opened again by name): the table's buffers point into the map. An object is
    mapped from its local copy (`_copied`)."""
    import pyarrow as pa

    if isinstance(path, str):
        mapped = _copied(path, shown)
    else:
        with gate.open_file(path, "datasets file", shown=shown) as f:
            try:
                mapped = mmap.mmap(  # gated: the descriptor gate.open_file opened (mmap dups it)
                    f.fileno(), 0, access=mmap.ACCESS_READ)
            except (ValueError, OSError) as e:  # an empty file cannot be mapped
                raise NodegraphError(f"datasets file '{clean(shown)}' cannot be read as "
                                     f"Arrow data: {e}") from None
    try:
        return pa.ipc.open_stream(pa.py_buffer(mapped)).read_all()
    except (pa.ArrowException, OSError, ValueError) as e:
        raise NodegraphError(f"datasets file '{clean(shown)}' is not an Arrow stream "
                             f"({e})") from None
