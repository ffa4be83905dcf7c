"""How an image data port is read from a photo: the part of a model's preprocessing a data
block knows.

A network trained on a data block sees the block's values, not the user's photos: each
file decoded, brought to one size, passed through the deterministic part of the augment
chain (Normalize, a centre crop) and perhaps flattened. A data block that reads images
describes this with an `ImageInput` on its dataset (``dataset.raw_inputs = {"x":
ImageInput(...)}``), so `Model.predict`, `nodegraph.forward`, the Python export and the ONNX
export can start from a photo (`nodegraph.runtime.preprocess`). Two stages:

- `read` (outside any graph): a file path, or a decoded photo as a uint8 array (H, W) or
  (H, W, C) of any size, to float32 (C, H, W) in [0, 1] at the block's size, as the block
  reads its own files (decoding, resize policy, grey or RGB);
- `forward` (torch only, so ONNX can hold it): a batch of such images — or of decoded
  photos already at that size as uint8 (N, H, W, C) — through `steps` and the layout.

A table block describes its x port with a `TableInput`: the input columns in order and
the numbering of its text (categorical) columns, so rows given by column name — a pandas
DataFrame, a pyarrow Table, a mapping of column name to values — become the array of
numbers the block's files became (`TableInput.array`). A text block describes its ids and
mask ports with a `TextInput`: texts tokenized as the block tokenized its table's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from nodegraph.model.errors import NodegraphError

# channel order per channel count, as the image blocks decode (Pillow's L and RGB)
CHANNEL_ORDER = {1: "grey", 3: "RGB"}


@dataclass(frozen=True)
class ImageInput:
    """One image port's raw form and how it becomes the port's value (see the module doc).
    `steps` are the augment chain's deterministic transforms (`augment.Chain.eval_steps`),
    `script` the same as ``v2.`` expressions for the Python export; `classes` the class
    names of the block's labels, when it knows them."""

    channels: int
    height: int
    width: int
    size: int | None  # the block's size param (None: images are used at their own size)
    policy: str  # the resize policy: stretch, crop or pad
    read: Callable[[Any], Any]  # path or uint8 photo -> float32 (C, H, W) numpy array
    steps: tuple[Callable, ...] = ()
    script: tuple[str, ...] = ()
    flat: bool = False
    classes: tuple[str, ...] = ()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """A batch of raw images as the port holds them: uint8 (N, H, W, C) photos are
        scaled to [0, 1] and put channels first; float (N, C, H, W) in [0, 1] pass; then
        the steps, then the layout (one row per sample when flat)."""
        if x.dtype == torch.uint8:
            x = x.permute(0, 3, 1, 2).to(torch.float32) / 255.0
        elif self.flat and x.ndim == 2:  # given as the port holds it, one row per sample
            x = x.reshape(x.shape[0], self.channels, self.height, self.width)
        for step in self.steps:
            x = step(x)
        return x.reshape(x.shape[0], -1) if self.flat else x

    def resize_text(self) -> str:
        """How a photo is brought to the block's size, in words."""
        if self.size is None:
            return f"none: every photo is {self.height} x {self.width} already"
        return {"stretch": f"stretch to {self.size} x {self.size} (bilinear)",
                "crop": f"scale the shorter side to {self.size} (bilinear), centre-crop "
                        f"{self.size} x {self.size}",
                "pad": f"scale the longer side to {self.size} (bilinear), centre on black "
                       f"{self.size} x {self.size}"}.get(self.policy, self.policy)


@dataclass(frozen=True)
class TableInput:
    """One table port's raw form: `columns`, the input columns in the port's order, and
    `categories`, per coded column its values and their numbers (the sorted distinct
    values the block found in its files, numbered from 0)."""

    columns: tuple[str, ...]
    categories: Mapping[str, Mapping[Any, int]] = field(default_factory=dict)

    def array(self, rows: Any, name: str) -> np.ndarray:
        """float32 (N, columns) of `rows` (see `is_rows`): each input column picked by
        name (others, such as the targets, are ignored), the coded ones numbered. A
        missing column, a value no category or a missing value is a NodegraphError naming
        `name` (node.port) and the column."""
        given = _column_names(rows)
        missing = [c for c in self.columns if c not in given]
        if missing:
            raise NodegraphError(
                f"input {name}: the rows have no column '{missing[0]}' (the data block "
                f"reads {', '.join(self.columns)}; given: {', '.join(map(str, given))})")
        out = [self._column(rows, c, name) for c in self.columns]
        sizes = {len(col) for col in out}
        if len(sizes) > 1:
            shown = ", ".join(f"{c}: {len(col)}" for c, col in zip(self.columns, out,
                                                                    strict=True))
            raise NodegraphError(f"input {name}: the columns hold different numbers of "
                                 f"rows ({shown})")
        if not out:
            return np.zeros((0, 0), np.float32)
        return np.stack(out, axis=1).astype(np.float32)

    def _column(self, rows: Any, column: str, name: str) -> np.ndarray:
        values = _column_values(rows, column)
        codes = self.categories.get(column)
        if codes is None:
            try:
                numbers = np.asarray(values, dtype=np.float64).reshape(-1)
            except (TypeError, ValueError):
                raise NodegraphError(
                    f"input {name}: column '{column}' holds {_first_text(values)!r}; the "
                    "data block read numbers there") from None
            if np.isnan(numbers).any():
                raise NodegraphError(f"input {name}: column '{column}' has missing values")
            return numbers
        out = np.empty(len(values), np.float64)
        for i, value in enumerate(values):
            code = codes.get(value)
            if code is None:
                known = ", ".join(map(str, codes))
                what = "a missing value" if _missing(value) else repr(value)
                raise NodegraphError(
                    f"input {name}: column '{column}' holds {what} (row {i}), not one of "
                    f"the categories the data block learned from its files ({known})")
            out[i] = code
        return out

    def categories_text(self) -> str:
        """The codes in words: ``plan: basic=0, plus=1, pro=2; region: ...``."""
        return "; ".join(f"{c}: " + ", ".join(f"{v}={k}" for v, k in codes.items())
                         for c, codes in self.categories.items())


@dataclass(frozen=True)
class TextInput:
    """One port of a text block's raw form: texts become token ids (`part` "ids") or their
    attention mask ("mask") by the block's own tokenizer, cut and padded as it did
    (`encode`: list of texts -> (ids, mask), each int64 (N, max_length))."""

    encode: Callable[[list[str]], tuple[np.ndarray, np.ndarray]]
    part: str  # "ids" or "mask"

    def array(self, texts: Any, name: str) -> np.ndarray:
        if not is_texts(texts):
            raise NodegraphError(f"input {name}: give texts (a string or a list of strings)")
        ids, mask = self.encode([texts] if isinstance(texts, str) else list(texts))
        return ids if self.part == "ids" else mask


def is_texts(data: Any) -> bool:
    """Whether `data` is raw text: a string, or a non-empty list or tuple of strings."""
    if isinstance(data, str):
        return True
    return isinstance(data, list | tuple) and bool(data) and all(isinstance(t, str)
                                                                  for t in data)


def is_rows(data: Any) -> bool:
    """Whether `data` holds table rows by column name: a pandas DataFrame, a pyarrow Table
    or RecordBatch, or a mapping of column names to values."""
    if isinstance(data, Mapping):
        return all(isinstance(k, str) for k in data)
    return hasattr(data, "column_names") or (
        hasattr(data, "columns") and hasattr(data, "iloc"))


def _column_names(rows: Any) -> list[Any]:
    if isinstance(rows, Mapping):
        return list(rows)
    if hasattr(rows, "column_names"):
        return list(rows.column_names)
    return list(rows.columns)


def _column_values(rows: Any, column: str) -> list[Any]:
    """One column as a list of Python values (numpy scalars made plain)."""
    col = rows[column]
    if hasattr(col, "to_pylist"):  # pyarrow
        return col.to_pylist()
    if hasattr(col, "tolist"):  # pandas, numpy, torch
        return col.tolist()
    return list(col)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _first_text(values: list[Any]) -> Any:
    return next((v for v in values if not isinstance(v, int | float | bool)), values[:1])


def image_inputs(dataset: Any) -> dict[str, ImageInput]:
    """The image ports of a dataset and their raw form (none for a table or arrays)."""
    found = getattr(dataset, "raw_inputs", None)
    return {k: v for k, v in found.items() if isinstance(v, ImageInput)} \
        if isinstance(found, dict) else {}


def text_inputs(dataset: Any) -> dict[str, TextInput]:
    """The ports of a dataset that texts become (a text block's ids and mask)."""
    found = getattr(dataset, "raw_inputs", None)
    return {k: v for k, v in found.items() if isinstance(v, TextInput)} \
        if isinstance(found, dict) else {}


def table_inputs(dataset: Any) -> dict[str, TableInput]:
    """The table ports of a dataset (a table block's x) and their columns."""
    found = getattr(dataset, "raw_inputs", None)
    return {k: v for k, v in found.items() if isinstance(v, TableInput)} \
        if isinstance(found, dict) else {}
