"""A trained model's preprocessing: what turns a raw input into what its network reads.

A network trained on a data block's values predicts right only on inputs made the same way:
a photo decoded and brought to the block's size, passed through the deterministic part of
the augment chain (Normalize, a centre crop; the random steps are skipped, as validation
skips them), and a table's columns scaled as the block scaled its own
(`nodegraph.runtime.normalization`). `Preprocess` is that, per data port, as a torch module,
so every way out applies the same code: `nodegraph.forward` and `Model.predict` on raw
inputs, the ONNX export (inside the graph), the Python export (written as a method).

The raw forms of a port:
- an image port (`nodegraph.kinds.rawinput.ImageInput`): photo files or decoded photos
  (read by the block's own reader, any size), uint8 (N, H, W, C) at the block's size, or
  float (N, C, H, W) in [0, 1] at that size — the files decoded as the block decodes them;
- a table port (`nodegraph.kinds.rawinput.TableInput`): rows by column name (a pandas
  DataFrame, a pyarrow Table, a mapping column -> values), the input columns picked and
  the text ones coded as the block coded its files (`table_array`), or that array itself:
  float32 (N, columns), numbers as the files hold them, text as its category code;
- a text port (`nodegraph.kinds.rawinput.TextInput`): texts, tokenized by the block's
  tokenizer into its ids or their attention mask;
- any other port: the values as the data files hold them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from nodegraph.kinds.rawinput import (
    CHANNEL_ORDER,
    ImageInput,
    TableInput,
    TextInput,
    image_inputs,
    is_rows,
    table_inputs,
    text_inputs,
)
from nodegraph.model.errors import NodegraphError
from nodegraph.runtime.compile import Compiled, Key


class Preprocess(nn.Module):
    """One data port's raw input to the port's value: the image stage, then the fitted
    normalisation (x − centre) / scale. Holds no weights (nothing in a state dict)."""

    def __init__(self, key: Key, image: ImageInput | None,
                 stats: Mapping[str, torch.Tensor] | None, dtype: torch.dtype | None = None):
        super().__init__()
        self.key, self.image, self.dtype = key, image, dtype  # dtype: the port's
        self.centre = None if stats is None else stats["centre"].detach().clone()
        self.scale = None if stats is None else stats["scale"].detach().clone()

    def with_steps(self, steps: tuple) -> Preprocess:
        """The same preprocessing with the image steps replaced (their ONNX form)."""
        assert self.image is not None
        stats = None if self.centre is None or self.scale is None else {
            "centre": self.centre, "scale": self.scale}
        return Preprocess(self.key, replace(self.image, steps=steps), stats, self.dtype)

    @property
    def empty(self) -> bool:
        """True when the raw input is the port's value already."""
        return self.centre is None and self.image is None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.image is not None:
            self._check_size(x)
            x = self.image.forward(x)
        if self.centre is not None and self.scale is not None:
            dtype = x.dtype
            x = ((x - self.centre.to(x.device)) / self.scale.to(x.device)).to(dtype)
        if self.image is not None and self.dtype is not None and self.dtype.is_floating_point:
            x = x.to(self.dtype)  # (a float64 graph's photos)
        return x

    def _check_size(self, x: torch.Tensor) -> None:
        image = self.image
        assert image is not None
        if torch.jit.is_tracing() or torch.onnx.is_in_onnx_export():
            return
        name = f"{self.key[0]}.{self.key[1]}"
        want = (image.height, image.width)
        if x.dtype == torch.uint8:
            if x.ndim != 4 or tuple(x.shape[1:3]) != want or x.shape[3] != image.channels:
                raise NodegraphError(
                    f"input {name}: uint8 photos go in as (N, H, W, C) = (N, {want[0]}, "
                    f"{want[1]}, {image.channels}); got {tuple(x.shape)} (give photos of "
                    "another size as files or one array per photo to Model.predict, which "
                    "resizes them as the data block does)")
        elif not (image.flat and x.ndim == 2) and (
                x.ndim != 4 or tuple(x.shape[1:]) != (image.channels, *want)):
            raise NodegraphError(
                f"input {name}: images go in as float (N, C, H, W) = (N, {image.channels}, "
                f"{want[0]}, {want[1]}) in [0, 1], or uint8 (N, H, W, C); got "
                f"{tuple(x.shape)} {str(x.dtype).removeprefix('torch.')}")


def preprocessors(compiled: Compiled, keys: list[Key] | None = None) -> dict[Key, Preprocess]:
    """A `Preprocess` per data port (those in `keys`, or all): the saved or fitted
    normalisation and the block's image reading."""
    out = {}
    for node, ds in compiled.datasets.items():
        images = image_inputs(ds)
        for port in ds.ports:
            if keys is not None and (node, port) not in keys:
                continue
            meta = compiled.report.outputs.get((node, port))
            out[(node, port)] = Preprocess((node, port), images.get(port),
                                           ds.normalization.get(port),
                                           None if meta is None else meta.dtype)
    return out


def apply(compiled: Compiled, values: dict[Key, Any]) -> dict[Key, Any]:
    """`values` keyed (node, port) with the raw inputs of data ports made into the ports'
    values (the rest as they are)."""
    steps = preprocessors(compiled, list(values))
    for key, tensor in list(values.items()):
        step = steps.get(key)
        if step is not None and isinstance(tensor, torch.Tensor) and not step.empty:
            with torch.no_grad():
                values[key] = step(tensor)
    return values


def raw_example(port: torch.Tensor, step: Preprocess) -> torch.Tensor:
    """Inputs of the raw form `step` reads, for a batch of the port's values (to trace or
    check an export with): photos as uint8 (N, H, W, C) (random pixels, seeded), other
    values un-scaled."""
    image = step.image
    if image is not None:
        generator = torch.Generator().manual_seed(0)
        return torch.randint(0, 256, (port.shape[0], image.height, image.width,
                                      image.channels), dtype=torch.uint8, generator=generator)
    if step.centre is not None and step.scale is not None:
        return (port * step.scale.to(port.dtype) + step.centre.to(port.dtype)).to(port.dtype)
    return port


def image_input(compiled: Compiled, key: Key) -> ImageInput | None:
    ds = compiled.datasets.get(key[0])
    return None if ds is None else image_inputs(ds).get(key[1])


def table_input(compiled: Compiled, key: Key) -> TableInput | None:
    ds = compiled.datasets.get(key[0])
    return None if ds is None else table_inputs(ds).get(key[1])


def text_input(compiled: Compiled, key: Key) -> TextInput | None:
    ds = compiled.datasets.get(key[0])
    return None if ds is None else text_inputs(ds).get(key[1])


def table_array(compiled: Compiled, key: Key, data: Any) -> Any:
    """`data` as port `key` takes it raw: table rows by column name (`is_rows`) made the
    float32 (N, columns) array of the block's input columns, text coded; anything else
    as it is."""
    table = table_input(compiled, key)
    if table is None or not is_rows(data):
        return data
    return torch.from_numpy(table.array(data, f"{key[0]}.{key[1]}"))


def is_photos(data: Any) -> bool:
    """Whether `data` is photos rather than an array of values: a file path (not a split
    name), a list of paths, a uint8 array (one photo (H, W[, C]) or a batch (N, H, W, C)),
    or a list of uint8 arrays."""
    if isinstance(data, str | Path):
        return True
    if isinstance(data, list | tuple) and data:
        return all(isinstance(d, str | Path) or _is_uint8(d) for d in data)
    return _is_uint8(data)


def _is_uint8(a: Any) -> bool:
    dtype = getattr(a, "dtype", None)
    return dtype in (np.uint8, torch.uint8)


def read_photos(image: ImageInput, data: Any, name: str) -> torch.Tensor:
    """Photos (see `is_photos`) read as the data block reads its files: float32
    (N, C, H, W) in [0, 1] at the block's size."""
    if isinstance(data, str | Path):
        photos: list[Any] = [data]
    elif isinstance(data, list | tuple):
        photos = list(data)
    else:
        a = data.numpy() if isinstance(data, torch.Tensor) else np.asarray(data)
        photos = list(a) if a.ndim == 4 else [a]
    arrays = []
    for photo in photos:
        if isinstance(photo, torch.Tensor):
            photo = photo.numpy()
        try:
            arrays.append(image.read(photo))
        except NodegraphError as e:
            raise NodegraphError(f"input {name}: {e}") from None
    return torch.from_numpy(np.stack(arrays))


def contract(compiled: Compiled, key: Key, step: Preprocess | None) -> dict[str, str]:
    """What an exported model's input `key` must hold, as text fields (dtype, layout, value
    range, size, channel order, the preprocessing inside), for a file's metadata and docs.
    `step` is the preprocessing inside the file (None: the bare network)."""
    image, table = image_input(compiled, key), table_input(compiled, key)
    meta = compiled.report.outputs.get(key)
    shape = tuple(meta.shape[1:]) if meta is not None else ()
    dtype = str(meta.dtype).removeprefix("torch.") if meta is not None else "float32"
    out: dict[str, str] = {}
    if step is not None and image is not None:
        out["dtype"] = "uint8"
        out["layout"] = f"N x H x W x C = N x {image.height} x {image.width} x {image.channels}"
        out["range"] = "0..255 (a decoded 8-bit photo)"
        out["channels"] = CHANNEL_ORDER.get(image.channels, str(image.channels))
        out["resize"] = image.resize_text()
        inside = ["/ 255, channels first", *image.script]
        if image.flat:
            inside.append("flattened to one row per sample")
        if step.centre is not None:
            inside.append("(x - centre) / scale, the data block's normalisation")
        out["preprocessing"] = "; ".join(inside)
    elif step is not None:
        out["dtype"] = dtype
        out["layout"] = "N x " + " x ".join(map(str, shape)) if shape else "N"
        out["range"] = "raw values, as the data files hold them"
        if table is not None and table.categories:
            out["range"] = ("raw values, as the data files hold them; a categorical column "
                            "holds its category's code (see categories; Model.table_rows "
                            "makes this array from a table's rows)")
        text = text_input(compiled, key)
        if text is not None:
            out["range"] = ("the data block's attention mask: 1 on a token, 0 on padding"
                            if text.part == "mask" else "token ids of the data block's "
                            "tokenizer, cut or padded to the length (Model.predict takes "
                            "the texts; the tokenizer is the block's tokenizer_file, or "
                            "the one it counted from its table)")
        out["preprocessing"] = ("(x - centre) / scale, the data block's normalisation"
                                if step.centre is not None else "none")
    else:
        out["dtype"] = dtype
        out["layout"] = "N x " + " x ".join(map(str, shape)) if shape else "N"
        out["range"] = "preprocessed: the data block's values after its normalisation and " \
                       "augment chain (this file holds the bare network)"
        out["preprocessing"] = "none (exported with --no-preprocess)"
    if table is not None:
        out["columns"] = ", ".join(table.columns)
        if table.categories:
            out["categories"] = table.categories_text()
    if image is not None and image.classes:
        out["classes"] = ", ".join(image.classes)
    return out
