"""`nodegraph import TARGET -o GRAPH.json`: a PyTorch model traced into a graph file.

The tracing is `nodegraph.interop.importing`; this module reads the command line, makes the
example inputs and says what was written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import torch

from nodegraph.interop.importing import finish, import_graph
from nodegraph.interop.importing.build import TRACERS
from nodegraph.interop.importing.targets import PRETRAINED
from nodegraph.model import wire_labels
from nodegraph.model.errors import NodegraphError
from nodegraph.model.fileformat import save
from nodegraph.model.groups import flatten, has_groups


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "import", description="Trace a PyTorch model with torch.fx (or torch.export). "
        "Known layers and functions become blocks, the rest opaque blocks; weights and "
        "example inputs are saved beside the graph, which names them, so run and export "
        "start from the imported weights.")
    p.add_argument("target", metavar="TARGET",
                   help="module:Class, module:factory (torchvision.models:resnet18), "
                   "path/to/file.py:Class, timm:MODEL_NAME, or transformers:GPT2LMHeadModel "
                   "(with --config or --pretrained)")
    p.add_argument("-o", "--output", required=True, metavar="GRAPH.json")
    p.add_argument("--kwargs", default="{}", metavar="JSON",
                   help="keyword arguments of the class's constructor or the factory")
    p.add_argument("--config", default=None, metavar="JSON",
                   help="a Hugging Face model class's config "
                   "(transformers:GPT2LMHeadModel --config '{\"n_layer\": 2}')")
    p.add_argument("--pretrained", default=None, metavar="FOLDER",
                   help="a Hugging Face model class's weights and config from a folder "
                   "save_pretrained wrote (nothing is downloaded)")
    p.add_argument("--tracer", choices=TRACERS, default="auto",
                   help="torch.fx, torch.export, or auto: fx first, torch.export where fx "
                   "cannot import the module (Hugging Face models)")
    p.add_argument("--input-shape", action="append", default=[], metavar="N,C,H,W",
                   help="an example input of this shape; one per forward argument")
    p.add_argument("--input-dtype", action="append", default=[], metavar="DTYPE",
                   help="dtype of the matching --input-shape: float32 (random normal, the "
                   "default), or long/int64 (random integers below --vocab: token ids)")
    p.add_argument("--vocab", type=int, default=2, metavar="N",
                   help="integer example inputs are drawn from 0..N-1 (the vocabulary size)")
    p.add_argument("--inputs", metavar="FILE.npz",
                   help="example inputs, one array per forward argument, in order")
    p.add_argument("--leaf", action="append", default=[], metavar="MODULE_PATH",
                   help="keep this submodule (dotted path, e.g. stages.2.1) as one opaque "
                   "block instead of tracing into it: for control flow fx cannot follow")
    p.add_argument("--loss", metavar="NAME",
                   help=f"add this loss on the first output ({', '.join(finish.LOSSES)} or "
                   "a block id), with the example data's targets")
    p.add_argument("--optimizer", metavar="NAME",
                   help=f"add this optimizer on the loss ({', '.join(finish.OPTIMIZERS)} "
                   "or a block id), so `nodegraph run` trains the graph")
    p.set_defaults(func=cmd_import)


INTEGER_DTYPES = {"long": torch.int64, "int64": torch.int64, "int": torch.int64,
                  "int32": torch.int32}
FLOAT_DTYPES = {"float": torch.float32, "float32": torch.float32, "float64": torch.float64,
                "double": torch.float64}


def _json_object(flag: str, text: str, example: str) -> dict:
    """A command-line JSON object (`--kwargs`, `--config`), or an error naming the flag."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise NodegraphError(f"{flag} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise NodegraphError(f"{flag} takes a JSON object: '{example}'")
    return value


def cmd_import(args: argparse.Namespace) -> int:
    sys.path.insert(0, os.getcwd())  # module:Class from the working folder, as python -m does
    kwargs = _json_object("--kwargs", args.kwargs, '{"num_classes": 10}')
    if args.config is not None:
        kwargs.update(_json_object("--config", args.config, '{"n_layer": 2}'))
    if args.pretrained is not None:
        kwargs[PRETRAINED] = args.pretrained
    examples = _examples(args)
    result = import_graph(args.target, examples, args.output, kwargs, leaves=args.leaf,
                          loss=args.loss, optimizer=args.optimizer, tracer=args.tracer)
    graph = result.graph
    _lay_out(graph, args.output)
    flat = flatten(graph).graph if has_groups(graph) else graph  # inside the groups too
    opaque = [f"{n.id} ({n.params.get('target') or n.params.get('function')})"
              for n in flat if n.type in ("opaque.Module", "opaque.Function")]
    inside = f" ({len(flat)} in all, in {len(graph.groups)} groups)" if graph.groups else ""
    print(f"wrote {args.output}: {len(graph)} nodes{inside}" + (
        f", {len(opaque)} opaque: {', '.join(opaque[:12])}" + (" ..." if len(opaque) > 12
                                                                else "") if opaque else ""))
    info = graph.extra["imported"]
    print(f"  weights in {info['weights']} beside it (run and export load them); the "
          f"graph's outputs {', '.join(info['outputs'])} match the module's to "
          f"{result.max_difference:.2g}")
    for name, dims in result.fixed_sizes.items():  # the import holds at these sizes only
        sizes = ", ".join(f"dim {d} = {s}" for d, s in dims.items())
        print(f"  valid only for input '{name}' with {sizes}: other sizes are refused")
    for note in result.notes:
        print(f"    {note}")
    external = sorted(graph.trusted - {"torch"})
    if external:
        print(f"  its opaque blocks import {', '.join(external)}: run nodegraph where that "
              "is importable (its folder on PYTHONPATH, or pip install -e your package)")
    if not args.optimizer:
        print("  forward-only: add --loss cross_entropy --optimizer adam to fine-tune it with "
              "`nodegraph run`")
    return 0


def _lay_out(graph, path: str) -> None:
    """The editor's own layered layout (Ctrl+L, Qt-free) for the graph and each group's
    body, saved: the file opens readable at fit, never as one row."""
    from nodegraph.gui.canvas.layout import auto_layout

    graph.set_ui("positions", {n: list(xy) for n, xy in auto_layout(graph).items()})
    for defn in graph.groups.values():
        defn.body.set_ui("positions", {n: list(xy) for n, xy in auto_layout(defn.body).items()})
    _record_labels(graph)
    save(graph, path)


def _record_labels(graph) -> None:
    """The wire labels of the editor's own check of the graph as written, kept in the file
    with the key of the content they belong to (`nodegraph.model.wire_labels`): the editor
    shows them at the first paint of a fresh import, before its block library is in."""
    from nodegraph.check.validate import validate

    report = validate(graph, for_training=wire_labels.for_training(graph))
    if report.ok:
        graph.extra["imported"]["shapes"] = {
            "key": wire_labels.content_key(graph),
            "labels": wire_labels.rows(wire_labels.labels_of(report, graph))}


def _examples(args: argparse.Namespace) -> tuple:
    if args.inputs:
        with np.load(args.inputs) as archive:
            return tuple(torch.as_tensor(archive[k]) for k in archive.files)
    if not args.input_shape:
        raise NodegraphError("give example inputs: --input-shape N,... (one per forward "
                             "argument; --input-dtype long for token ids) or --inputs "
                             "FILE.npz")
    if len(args.input_dtype) > len(args.input_shape):
        raise NodegraphError("--input-dtype: one per --input-shape, in the same order")
    generator = torch.Generator().manual_seed(0)
    examples = []
    for i, text in enumerate(args.input_shape):
        try:
            shape = [int(d) for d in text.split(",")]
        except ValueError:
            raise NodegraphError("--input-shape takes sizes like 8,1,28,28") from None
        dtype = args.input_dtype[i] if i < len(args.input_dtype) else "float32"
        if dtype in INTEGER_DTYPES:
            if args.vocab < 1:
                raise NodegraphError("--vocab must be at least 1")
            examples.append(torch.randint(0, args.vocab, shape, generator=generator,
                                          dtype=INTEGER_DTYPES[dtype]))
        elif dtype in FLOAT_DTYPES:
            examples.append(torch.randn(shape, generator=generator, dtype=FLOAT_DTYPES[dtype]))
        else:
            raise NodegraphError(f"--input-dtype {dtype}: use one of "
                                 f"{', '.join([*FLOAT_DTYPES, *INTEGER_DTYPES])}")
    return tuple(examples)
