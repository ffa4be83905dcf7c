"""`nodegraph run GRAPH`: train a graph file headless, printing progress as it goes.

Overrides for this run come from the command line (`--epochs`, `--set NODE.PARAM=VALUE`,
`--seed`, `--device`, ...); outputs are the metrics file, checkpoints, probe frames and the
trackers' logs, each folder named on stderr before the run starts (a graph file's own
`training.log_dir` only inside the graph's folder: `nodegraph.kinds.write_confine`).
`--nproc` / `--nnodes` start the same command under torchrun
(`nodegraph.runtime.distributed`), where only rank 0 talks and writes. torch is imported
when the command runs, not when its parser is built.
"""

from __future__ import annotations

import argparse
import json
import sys

from nodegraph.cli.common import (
    EXIT_INTERRUPTED,
    add_graph_argument,
    beside,
    file_log_dir,
    given_log_dir,
    open_graph,
    parse_assignments,
    say,  # control characters from the file escaped
    weights_loader,
    with_assignments,
)
from nodegraph.model.errors import NodegraphError


def register(sub) -> None:
    run = sub.add_parser("run", description="Train a graph file headless.")
    add_graph_argument(run)
    run.add_argument("--epochs", type=int, help="override training.epochs")
    run.add_argument("--set", action="append", default=[], metavar="NODE.PARAM=VALUE",
                     help="change a param (or training.KEY) for this run; repeatable")
    run.add_argument("--seed", type=int)
    run.add_argument("--device", help="cpu, cuda, cuda:N or auto")
    run.add_argument("--threads", type=int, metavar="N", help="CPU threads for the arithmetic "
                     "(overrides training.threads and OMP_NUM_THREADS; default: chosen from "
                     "the model's work per step)")
    run.add_argument("--metrics-out", metavar="FILE.json", help="write history and final "
                     "metrics (- for stdout)")
    run.add_argument("--checkpoint-dir", metavar="DIR", help="write checkpoints here each epoch")
    run.add_argument("--save-model", metavar="FILE.ngz", help="write the trained model at the end "
                     "(graph, weights, optimizer state, normalisation, history): "
                     "nodegraph.load_model reads it to predict, export or fit on")
    run.add_argument("--resume", action="store_true", help="continue from the checkpoint in DIR")
    run.add_argument("--probe-out", metavar="FILE.jsonl", help="record activation and gradient "
                     "probe frames for replay in the editor")
    run.add_argument("--log-dir", metavar="DIR", help="write TensorBoard event files here "
                     "(scalars, learning rates, hyperparameters, probe histograms)")
    run.add_argument("--mlflow", metavar="URI", help="record the run in MLflow at this "
                     "tracking URI (params, metrics per epoch, the graph as an artifact)")
    run.add_argument("--quiet", action="store_true", help="print only the final result (and, "
                     "on stderr, the folders the run writes into)")
    run.add_argument("--compile", action="store_true", help="run the training forward through "
                     "torch.compile (inductor); falls back to eager where it cannot")
    run.add_argument("--init-weights", metavar="FILE.safetensors", help="start from these "
                     "weights, keyed node.param like `nodegraph export --to weights` and "
                     "checkpoints write them")
    run.add_argument("--nproc", type=int, metavar="N", help="train data-parallel on N processes "
                     "(starts torchrun; DistributedDataParallel, gloo on CPU, nccl on GPUs); "
                     "with --nnodes: processes on this machine (default 1)")
    run.add_argument("--nnodes", type=int, metavar="N", help="train across N machines: run the "
                     "same command on each, with its own --node-rank and the same --rdzv")
    run.add_argument("--node-rank", type=int, metavar="R", help="with --nnodes: this machine's "
                     "number, 0 to N-1 (machine 0 hosts the rendezvous)")
    run.add_argument("--rdzv", metavar="HOST:PORT", help="with --nnodes: the address of "
                     "machine 0 and a free port there, where the machines meet")
    run.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    if args.mlflow:  # before torch's import: the line comes at once, a dead server fails fast
        from nodegraph.runtime.endpoint import reach

        reach("MLflow", args.mlflow, "--mlflow")
    from nodegraph.interop.model import Model
    from nodegraph.model.events import Emitter
    from nodegraph.runtime import distributed
    from nodegraph.runtime.render import ConsoleRenderer

    if args.nnodes:
        argv = args.argv
        for option in ("--nproc", "--nnodes", "--node-rank", "--rdzv"):
            argv = without_option(argv, option)
        return distributed.launch_nodes(args.nnodes, args.node_rank, args.rdzv,
                                        args.nproc or 1, argv)
    if args.node_rank is not None or args.rdzv:
        raise NodegraphError("--node-rank and --rdzv belong with --nnodes")
    if args.nproc:
        return distributed.launch(args.nproc, without_option(args.argv, "--nproc"))
    main_rank = distributed.is_main()  # under torchrun only rank 0 talks and writes
    assignments = parse_assignments(args.set)
    given_log_dir(args, assignments)  # --set training.log_dir=DIR: the user's own
    graph = with_assignments(open_graph(args), assignments)
    log_dir = args.log_dir or file_log_dir(graph)
    if main_rank:  # a path that cannot be written fails now, not after the whole run
        _check_outputs(args)
        _say_outputs(args, log_dir)
    prepare = weights_loader(args.init_weights) if args.init_weights else None
    if args.compile:
        graph.set_training("compile", "inductor")
    events = Emitter()
    renderer = ConsoleRenderer(graph.name, quiet=args.quiet or not main_rank)
    renderer.attach(events)
    writer = None
    if args.probe_out and main_rank:
        from nodegraph.runtime.probes import ProbeFrame, ProbeWriter

        writer = ProbeWriter(args.probe_out)
        events.subscribe(writer, ProbeFrame)
    model = Model(graph)  # `train` through a Model, which --save-model writes whole
    try:
        with beside(args.graph):
            result = model.fit(args.epochs, seed=args.seed, device=args.device,
                               events=events, checkpoint_dir=args.checkpoint_dir,
                               resume=args.resume, prepare=prepare, log_dir=log_dir,
                               mlflow=args.mlflow, threads=args.threads)
    except KeyboardInterrupt:  # before the loop started (the loop itself returns cancelled)
        renderer.close()
        _say_checkpoint(args.checkpoint_dir)
        return EXIT_INTERRUPTED
    finally:
        renderer.close()
        if writer is not None:
            writer.close()
        distributed.teardown()
    if not main_rank:
        return 0
    if args.metrics_out:
        from nodegraph.model.outputs import write_text

        text = json.dumps({"history": result.history, "final": result.final,
                           "cancelled": result.cancelled}, indent=1, default=float)
        if args.metrics_out == "-":  # stdout, as the usual convention has it
            print(text)
        else:
            write_text(args.metrics_out, text, "--metrics-out")
    if args.save_model:
        from pathlib import Path

        Path(args.save_model).parent.mkdir(parents=True, exist_ok=True)  # as it was checked
        say(f"model saved to {model.save(args.save_model)}", file=sys.stderr)
    if result.cancelled:
        _say_checkpoint(args.checkpoint_dir)
        return EXIT_INTERRUPTED
    if args.metrics_out == "-":  # stdout holds the JSON alone; the summary goes to stderr
        renderer.out = renderer.err
    renderer.print_final(result)
    return 0


def without_option(argv: list[str], option: str) -> list[str]:
    """`argv` less `option VALUE` / `option=VALUE`."""
    out, skip = [], False
    for item in argv:
        if skip:
            skip = False
        elif item == option:
            skip = True
        elif not item.startswith(option + "="):
            out.append(item)
    return out


def _check_outputs(args: argparse.Namespace) -> None:
    """Every file `run` will write can be written (a device such as /dev/stdout is fine)."""
    from nodegraph.model.outputs import check_file

    for flag, path in (("--metrics-out", args.metrics_out), ("--probe-out", args.probe_out)):
        if path and not (flag == "--metrics-out" and path == "-"):
            check_file(path, flag, special_ok=True)
    if args.save_model:  # a zip written beside and renamed: a regular file only
        check_file(args.save_model, "--save-model")


def _say_outputs(args: argparse.Namespace, log_dir: str | None) -> None:
    """One line on stderr for each folder the run will write into, before it starts: a
    file's settings never write anywhere unannounced."""
    from pathlib import Path

    from nodegraph.model.outputs import is_special

    named = [("TensorBoard event files", log_dir, True),
             ("checkpoints", args.checkpoint_dir, True),
             ("probe frames", args.probe_out, False),
             ("metrics", None if args.metrics_out == "-" else args.metrics_out, False),
             ("the trained model", args.save_model, False)]
    for what, path, is_folder in named:
        if path and not (not is_folder and is_special(Path(path))):
            where = Path(path).expanduser().absolute()
            say(f"writing {what} in {where if is_folder else where.parent}"
                + ("" if is_folder else f" (as {where.name})"), file=sys.stderr)
    if args.mlflow:  # a server, or a local store (a folder, a database file)
        say(f"recording the run in MLflow at {args.mlflow}", file=sys.stderr)


def _say_checkpoint(folder: str | None) -> None:
    """After an interrupt: where the checkpoint is, only when one is on disk."""
    from nodegraph.runtime.checkpoint import written_epoch

    epoch = written_epoch(folder) if folder else None
    if epoch is None:
        say("interrupted" + (f"; no checkpoint was written in {folder}" if folder else ""),
            file=sys.stderr)
    else:
        say(f"interrupted; the checkpoint of epoch {epoch} is in {folder} (continue with "
            "--resume)", file=sys.stderr)
