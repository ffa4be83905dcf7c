"""`nodegraph forward GRAPH`: one batch through the graph, every output to an .npz file."""

from __future__ import annotations

import argparse
import io
import os
import tempfile
from pathlib import Path

from nodegraph.cli.common import (
    add_graph_argument,
    beside,
    open_graph,
    say,  # control characters from the file escaped
    weights_loader,
)
from nodegraph.model.errors import NodegraphError
from nodegraph.model.outputs import cannot_write, check_file


def register(sub) -> None:
    p = sub.add_parser("forward", description="Run the graph forward once (inference mode, no "
                       "gradients) on one batch of its data blocks or on arrays you give, and "
                       "write every output as NODE.PORT in an .npz file.")
    add_graph_argument(p)
    p.add_argument("--inputs", metavar="FILE.npz", help="arrays named NODE.PORT (e.g. data.x) "
                   "that replace those outputs; by default a batch of the data blocks")
    p.add_argument("--preprocessed", "--normalized", dest="normalized", action="store_true",
                   help="the --inputs are already what the network reads (by default they "
                   "are raw and go through the model's preprocessing: scaled with the "
                   "statistics saved in --weights or fitted on the data; an image block's "
                   "photos, float N x C x H x W in [0, 1] or uint8 N x H x W x C at its size, "
                   "through the deterministic part of its augment chain)")
    p.add_argument("--split", default="train", choices=("train", "val", "test"))
    p.add_argument("--batch", type=int, default=0, help="which batch of the split (from 0)")
    p.add_argument("--weights", metavar="FILE.safetensors", help="trained weights to use")
    p.add_argument("--node", action="append", default=[], metavar="NODE",
                   help="only what these nodes need (repeatable)")
    p.add_argument("-o", "--out", required=True, metavar="FILE.npz")
    p.set_defaults(func=cmd_forward)


def cmd_forward(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from nodegraph.runtime.compile import compile_graph
    from nodegraph.runtime.forward import forward

    check_file(args.out, "--out")
    graph = open_graph(args)
    inputs = None
    if args.inputs:
        try:
            with np.load(args.inputs) as archive:
                inputs = {name: archive[name] for name in archive.files}
        except (OSError, ValueError) as e:
            raise NodegraphError(f"--inputs {args.inputs}: cannot read it as .npz ({e})") from None
    with beside(args.graph):
        compiled = compile_graph(graph, for_training=False)
        if args.weights:
            weights_loader(args.weights)(compiled)
        outputs = forward(graph, inputs, split=args.split, batch=args.batch, compiled=compiled,
                          nodes=set(args.node) or None, raw=not args.normalized)
    arrays = {f"{n}.{p}": t.detach().cpu().float().numpy() if t.dtype == torch.bfloat16
              else t.detach().cpu().numpy() for (n, p), t in outputs.items()}
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=True, **arrays)  # numpy's default, named for mypy
    _write_bytes(Path(args.out), buffer.getvalue())
    for name, a in arrays.items():
        say(f"  {name:<28} {str(a.shape):<18} {a.dtype}")
    say(f"wrote {len(arrays)} arrays to {Path(args.out)}")
    return 0


def _write_bytes(path: Path, data: bytes) -> None:
    """Replace `path` whole or not at all (temp file beside it, then a rename)."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise cannot_write("--out", path, e) from None
