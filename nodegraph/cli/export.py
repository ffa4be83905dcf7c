"""`nodegraph export GRAPH --to python|onnx|weights -o OUT`: the command line of `export`."""

from __future__ import annotations

import argparse
from pathlib import Path

from nodegraph.cli.main import add_graph_argument, open_graph


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "export",
        description="python: one file with the model class and a training script that "
        "reproduces `nodegraph run`; onnx: the forward graph in inference mode; weights: "
        "trained weights keyed node.param (they load into the Python model).")
    add_graph_argument(p)
    p.add_argument("--to", required=True, choices=("python", "onnx", "weights"))
    p.add_argument("-o", "--output", required=True, metavar="FILE")
    p.add_argument("--weights", metavar="FILE.safetensors",
                   help="trained weights (a checkpoint's last/model.safetensors) for onnx and "
                   "weights")
    p.add_argument("--train", action="store_true",
                   help="weights: train the graph first and export what it learns")
    p.add_argument("--outputs", nargs="+", metavar="NODE[.PORT]",
                   help="onnx: the values to output (default: the predictions)")
    p.add_argument("--set", action="append", default=[], metavar="NODE.PARAM=VALUE",
                   help="change a param (or training.KEY) before exporting; repeatable")
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from nodegraph.cli.main import parse_assignments, with_assignments
    from nodegraph.kinds.dataset import files_relative_to
    from nodegraph.model.outputs import cannot_write, check_file

    graph = with_assignments(open_graph(args), parse_assignments(args.set))
    out = check_file(args.output, "-o")  # before any training or tracing
    try:
        with files_relative_to(Path(args.graph).parent):  # the graph's data files, from its
            _export(args, graph, out)                     # folder
    except OSError as e:  # the writes of to_python / torch.onnx.export, e.g. a full disk
        raise cannot_write("-o", out, e) from None
    return 0


def _export(args: argparse.Namespace, graph, out: Path) -> None:
    if args.to == "python":
        from nodegraph.interop.export.python import to_python

        result = to_python(graph, out, Path(args.graph).name)
        print(f"wrote {out}: class {result.class_name}"
              + (f"; train it with `python {out}`" if result.trains else ""))
        for node, block in result.saved_data.items():
            print(f"  the data of '{node}' ({block}) is saved in {result.npz}: the script "
                  "cannot make it again without nodegraph")
    elif args.to == "onnx":
        from nodegraph.interop.export.onnx import to_onnx
        from nodegraph.interop.export.weights import read_weights

        weights = read_weights(args.weights) if args.weights else None
        result = to_onnx(graph, out, args.outputs, weights)
        check = ("the outputs depend on random draws, so onnxruntime's were not compared"
                 if result.random else
                 "onnxruntime is not installed, so the file was not checked"
                 if result.max_difference is None else
                 f"onnxruntime agrees with the graph to {result.max_difference:.2g}")
        print(f"wrote {out}: inputs {', '.join(result.inputs) or '-'}; outputs "
              f"{', '.join(result.outputs)}; {check}")
    else:
        from nodegraph.interop.export.weights import to_weights

        count = to_weights(graph, out, args.weights, args.train)
        print(f"wrote {count} tensors to {out} (keys node.param)")
