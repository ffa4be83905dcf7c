"""`nodegraph export GRAPH --to python|onnx|weights -o OUT`: the command line of `export`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nodegraph.cli.common import (
    add_graph_argument,
    beside,
    open_graph,
    parse_assignments,
    say,  # control characters from the file escaped
    with_assignments,
)
from nodegraph.runtime import referenced_weights as fx_weights


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "export",
        description="python: one file with the model class and a training script that "
        "reproduces `nodegraph run`; onnx: the forward graph in inference mode; weights: "
        "trained weights keyed node.param (they load into the Python model). GRAPH may be "
        "a saved model (.ngz, from run --save-model): it is exported with its trained "
        "weights and fitted scaling.")
    add_graph_argument(p)
    p.add_argument("--to", required=True, choices=("python", "onnx", "weights"))
    p.add_argument("-o", "--output", required=True, metavar="FILE")
    p.add_argument("--weights", metavar="FILE.safetensors",
                   help="trained weights (a checkpoint's last/model.safetensors) for onnx and "
                   "weights")
    p.add_argument("--train", action="store_true",
                   help="train the graph first and export what it learns (every target)")
    p.add_argument("--outputs", nargs="+", metavar="NODE[.PORT]",
                   help="onnx: the values to output (default: the predictions)")
    p.add_argument("--set", action="append", default=[], metavar="NODE.PARAM=VALUE",
                   help="change a param (or training.KEY) before exporting; repeatable")
    p.add_argument("--opset", type=int, default=None, metavar="N",
                   help="onnx: the opset version (default: 17, or the first that holds "
                   "every op the graph uses: 18 for F.fold)")
    p.add_argument("--no-preprocess", dest="preprocess", action="store_false",
                   help="onnx: the bare network, whose inputs are already preprocessed (by "
                   "default the file starts from raw inputs: photos as uint8 N x H x W x C "
                   "at the data block's size, table rows as the files hold them)")
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from nodegraph.model.outputs import cannot_write, check_file

    model = Path(args.graph).suffix.lower() == MODEL_SUFFIX
    graph = None if model else with_assignments(open_graph(args), parse_assignments(args.set))
    if model:
        _refuse_with_a_model(args)
    out = check_file(args.output, "-o")  # before any training or tracing
    try:
        if model:
            _export_model(args, out)
        else:
            with beside(args.graph):  # the graph's data files, from its folder
                _export(args, graph, out)
    except OSError as e:  # the writes of to_python / torch.onnx.export, e.g. a full disk
        raise cannot_write("-o", out, e) from None
    return 0


MODEL_SUFFIX = ".ngz"  # a saved model (`run --save-model`, `Model.save`), not a graph file


def _refuse_with_a_model(args: argparse.Namespace) -> None:
    """A saved model carries its graph and trained weights: what changes either is refused."""
    from nodegraph.model.errors import NodegraphError

    given = [flag for flag, value in (("--weights", args.weights), ("--train", args.train),
                                      ("--set", args.set)) if value]
    if given:
        raise NodegraphError(
            f"{', '.join(given)} cannot be used with a saved model: '{args.graph}' holds its "
            "graph and trained weights and is exported as it is (to change it, load it in "
            "Python with nodegraph.load_model and fit on, or export the graph file with "
            "--weights)")


def _export_model(args: argparse.Namespace, out: Path) -> None:
    """A saved model exported with its trained weights and its data blocks' fitted
    scaling (`Model.export`); its data files are read beside it and in --data-root."""
    import nodegraph
    from nodegraph.cli.common import allowed_roots
    from nodegraph.kinds import confine

    with confine.allowing(allowed_roots(args)):
        model = nodegraph.load_model(args.graph, trust=args.trust, grant=args.grant)
        carried = (f"trained, from {args.graph} ({model.epochs} epoch"
                   f"{'' if model.epochs == 1 else 's'})")
        if args.to == "python":
            result = model.export("python", out, source_name=Path(args.graph).name)
            _say_python(out, result)
            say(f"  weights: {carried}, saved in "
                f"{out.with_name(out.stem + '.weights.safetensors')}; the class starts from "
                "fresh weights: model.load_state_dict(safetensors.torch.load_file(...))")
        elif args.to == "onnx":
            _say_onnx(out, model.export("onnx", out, outputs=args.outputs, opset=args.opset,
                                        preprocess=args.preprocess), carried)
        else:
            model.export("weights", out)
            say(f"wrote {len(model.weights())} tensors to {out} (keys node.param); weights: "
                f"{carried}")


def _export(args: argparse.Namespace, graph, out: Path) -> None:
    weights, carried = _weights(args, graph)
    if args.to == "python":
        from nodegraph.interop.export.python import to_python

        result = to_python(graph, out, Path(args.graph).name)
        _say_python(out, result)
        if weights is not None or carried.startswith("the imported"):
            from nodegraph.runtime import checkpoint

            beside = out.with_name(out.stem + ".weights.safetensors")  # not the graph's own
            from nodegraph.runtime.normalization import split

            checkpoint.save_weights(beside, split(weights)[0] if weights is not None else
                                    _state(graph))
            say(f"  weights: {carried}, saved in {beside}; the class starts from fresh "
                  f"weights: model.load_state_dict(safetensors.torch.load_file("
                  f"'{beside.name}'))")
        else:
            _say_untrained(carried, "the class starts from them")
    elif args.to == "onnx":
        from nodegraph.interop.export.onnx import to_onnx

        _say_onnx(out, to_onnx(graph, out, args.outputs, weights, opset=args.opset,
                               preprocess=args.preprocess), carried)
        _say_untrained(carried, "the file carries them")
    else:
        from nodegraph.interop.export.weights import to_weights

        referenced = fx_weights.referenced(graph)
        source = args.weights or (None if args.train else referenced)
        count = to_weights(graph, out, source, args.train)
        say(f"wrote {count} tensors to {out} (keys node.param); weights: {carried}")


def _say_python(out: Path, result) -> None:
    say(f"wrote {out}: class {result.class_name}"
        + (f"; train it with `python {out}`" if result.trains else ""))
    for node, block in result.saved_data.items():
        say(f"  the data of '{node}' ({block}) is saved in {result.npz}: the script "
            "cannot make it again without nodegraph")


def _say_onnx(out: Path, onnx, carried: str) -> None:
    check = ("the outputs depend on random draws, so onnxruntime's were not compared"
             if onnx.random else
             "onnxruntime is not installed, so the file was not checked"
             if onnx.max_difference is None else
             f"onnxruntime agrees with the graph to {onnx.max_difference:.2g}")
    say(f"wrote {out}: inputs {', '.join(onnx.inputs) or '-'}; outputs "
        f"{', '.join(onnx.outputs)}; {check}")
    for name, fields in onnx.contract.items():
        say(f"  input {name}: {fields.get('dtype')} {fields.get('layout')}, "
            f"{fields.get('range')}" + (f"; resize: {fields['resize']}"
                                        if "resize" in fields else "")
            + f"; preprocessing in the file: {fields.get('preprocessing')}")
    say(f"  weights: {carried}")


def _weights(args: argparse.Namespace, graph) -> tuple[dict | None, str]:
    """The weights an export carries (None: what compile gives) and a phrase naming them."""
    from nodegraph.interop.export.weights import read_weights

    if args.weights:  # with a checkpoint's normalisation entries (the ONNX file's
        # preprocessing scales with them; the python branch saves the weights alone)
        return read_weights(args.weights), f"from {args.weights}"
    if args.train:
        from nodegraph.runtime.train import train

        say("training the graph first (--train) ...", file=sys.stderr)
        module = train(graph).unless_cancelled().module
        return ({k.removeprefix("blocks."): v.detach().clone()
                 for k, v in module.state_dict().items()}, "trained here (--train)")
    referenced = fx_weights.referenced(graph)
    if referenced is not None:
        return None, f"the imported weights in {referenced.name}"
    return None, UNTRAINED


UNTRAINED = "UNTRAINED (freshly initialised)"


def _say_untrained(carried: str, what: str) -> None:
    if carried == UNTRAINED:
        say(f"warning: these weights are untrained, freshly initialised, and {what}; pass "
              "--train to train the graph first, or --weights FILE (a checkpoint's "
              "last/model.safetensors from nodegraph run --checkpoint-dir)", file=sys.stderr)


def _state(graph) -> dict:
    """The weights compile loads for `graph` (its referenced file), keyed node.param."""
    from nodegraph.runtime.compile import compile_graph

    compiled = compile_graph(graph, device="cpu", for_training=False)
    return {k.removeprefix("blocks."): v.detach().clone()
            for k, v in compiled.module.state_dict().items()}
