"""The files of a Hugging Face `save_to_disk` folder, checked before `datasets` opens them.

`datasets.load_from_disk` trusts the folder: it joins each ``state.json``
``_data_files[].filename`` (and each split a ``dataset_dict.json`` names) to the folder
unchecked, so ``../`` or an absolute name reads Arrow data from anywhere, and a FIFO among
the files blocks it. Before `datasets` sees a folder, `checked_folder` reads those JSON
files itself through the file gate (`nodegraph.kinds.gate`: regular files, at most
`MAX_JSON` bytes) and refuses a split or data file that is not a plain name inside the
folder, or that the gate refuses (a symlink leading outside, a FIFO, a device).
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

from nodegraph.kinds import gate
from nodegraph.model.errors import NodegraphError
from nodegraph.model.sanitize import clean

MAX_JSON = 10 * 2**20  # a save_to_disk JSON file (features, file names): a few KB in practice
DICT_JSON, STATE_JSON, INFO_JSON = "dataset_dict.json", "state.json", "dataset_info.json"


def _json(path: Path, shown: str) -> Any:
    raw = gate.read_bytes(path, "datasets file", MAX_JSON, shown=shown)
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


def _dataset(folder: Path, shown: str) -> None:
    """A saved `Dataset` folder: its JSON read and its Arrow files checked."""
    state = _json(folder / STATE_JSON, f"{shown}/{STATE_JSON}")
    _json(folder / INFO_JSON, f"{shown}/{INFO_JSON}")
    files = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(files, list) or not files:
        raise NodegraphError(f"datasets file '{clean(shown)}/{STATE_JSON}' lists no data "
                             "files (_data_files)")
    for k, entry in enumerate(files):
        name = _plain(entry.get("filename") if isinstance(entry, dict) else None, shown,
                      f"_data_files[{k}].filename")
        gate.check(folder / name, "datasets file", shown=f"{shown}/{name}")


def checked_folder(folder: Path, shown: str) -> None:
    """Refuse a save_to_disk folder (a Dataset, or a DatasetDict of them) that names files
    outside itself or holds a file the gate refuses; a folder that is neither kind passes,
    for `datasets` to say so."""
    gate.check(folder, "datasets folder", want="folder", shown=shown)
    if (folder / STATE_JSON).exists() or (folder / INFO_JSON).exists() \
            or (folder / STATE_JSON).is_symlink():
        _dataset(folder, shown)
        return
    if not ((folder / DICT_JSON).exists() or (folder / DICT_JSON).is_symlink()):
        return
    doc = _json(folder / DICT_JSON, f"{shown}/{DICT_JSON}")
    splits = doc.get("splits") if isinstance(doc, dict) else None
    if not isinstance(splits, list):
        raise NodegraphError(f"datasets file '{clean(shown)}/{DICT_JSON}' lists no splits")
    for split in splits:
        name = _plain(split, shown, "split")
        gate.check(folder / name, "datasets folder", want="folder", shown=f"{shown}/{name}")
        _dataset(folder / name, f"{shown}/{name}")
