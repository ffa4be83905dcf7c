"""What a file that is not a graph file is, and what to open it with instead.

`nodegraph.load("model.ngz")` or `nodegraph run weights.safetensors` used to end in a UTF-8
decoding error; a user who gave the wrong one of the project's files (or a PyTorch one) is
told what the file is and what takes it. Read from the file's first bytes and its suffix.
"""

from __future__ import annotations

import stat
from pathlib import Path

HEAD = 64  # bytes read to tell the kinds apart

NGZ = ("a model saved by Model.save (graph, weights, optimizer state, history); open it in "
       "Python with nodegraph.load_model({path!r})")
WEIGHTS = ("weights (safetensors), not a graph; start a graph from them with `nodegraph run "
           "GRAPH.json --init-weights {path}`, or use them with `--weights {path}` of "
           "forward, export and sample")
ONNX = ("an ONNX model, which nodegraph does not open; run it with onnxruntime, or bring the "
        "PyTorch model it came from in with `nodegraph import module:Class -o GRAPH.json "
        "--input-shape ...`")
TORCH = ("a PyTorch file (torch.save, a pickle), which nodegraph never unpickles; bring the "
         "model's class in with `nodegraph import module:Class -o GRAPH.json --input-shape "
         "...`, and its weights as safetensors (`--init-weights`)")
NUMPY = ("a NumPy array, which is data: name it in a data.NumPy block's params of a graph "
         "file")
ZIP = "a zip archive, not a graph file (a graph file is JSON)"


def describe(path: Path) -> str | None:
    """What `path` is when it is one of the known non-graph files, with what to call
    instead; None for anything else (a graph file, text, an unreadable path)."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # never open a FIFO or device to sniff it
            return None
        with path.open("rb") as f:
            head = f.read(HEAD)
    except OSError:
        return None
    suffix = path.suffix.lower()
    template = _kind(head, suffix)
    return None if template is None else template.format(path=str(path))


def _kind(head: bytes, suffix: str) -> str | None:
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        if suffix == ".ngz":
            return NGZ
        if suffix in (".pt", ".pth", ".bin", ".ckpt"):
            return TORCH
        return ZIP
    if head.startswith(b"\x80") and suffix in (".pt", ".pth", ".bin", ".ckpt", ".pkl"):
        return TORCH  # the pickle protocol's first byte
    if head.startswith(b"\x93NUMPY"):
        return NUMPY
    if _is_safetensors(head):
        return WEIGHTS
    if suffix == ".onnx":
        return ONNX
    if suffix in (".pt", ".pth", ".ckpt", ".pkl"):
        return TORCH
    return None


def _is_safetensors(head: bytes) -> bool:
    """A little-endian u64 header length, then the JSON header's opening brace."""
    if len(head) < 10:
        return False
    size = int.from_bytes(head[:8], "little")
    return 2 <= size < 100 * 2**20 and head[8:9] == b"{"
