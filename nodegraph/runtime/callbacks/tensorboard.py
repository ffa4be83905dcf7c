"""TensorBoard: a run written as event files a user's `tensorboard --logdir` shows.

Every scalar has one x axis, the global step: per epoch every numeric train/val stat
(`train/loss`, `val/accuracy`), each optimizer's learning rate (`lr/<node>`) and the epoch
itself (`epoch`: read any curve against it), and the same numbers by epoch under
`by_epoch/` (the second view); per step the loss the loop already reads every `loss_every`
steps (`step/loss`, so logging adds no device sync). At the start, the graph as TensorBoard's
Graphs tab draws it (one node per block, named by its id, its block type as the op). During
the run, histograms of each weight and its gradient (`weights/<node.param>`,
`weight_grads/<node.param>`) `training.histograms_per_epoch` times an epoch (4 by default).
At the end the final numbers of every split (`final/test/accuracy`, ...) and the graph's
hyperparameters (number, text and flag params of its nodes, the training settings) for the
HParams tab, with the final and last epoch's numbers as its metrics. While probes run,
each probe frame becomes histograms of outputs (`activations/<node>.<port>`) and of the
gradients arriving at them (`gradients/<node>.<port>`), and the parameters' gradient norms
(`grad_norm/<node.param>`).

tensorboard is optional (the `tracking` extra): it is imported when a run asks for a log
folder, never by `import nodegraph`.
"""

from __future__ import annotations

import math
from numbers import Real
from pathlib import Path
from typing import Any

from nodegraph.model.errors import NodegraphError
from nodegraph.model.events import Emitter, RunFinished, StepEnded
from nodegraph.model.graph import Graph
from nodegraph.runtime.callbacks.base import Callback
from nodegraph.runtime.probes import Histogram, ProbeFrame


def summary_writer(log_dir: Path):
    """torch's SummaryWriter on `log_dir`, or an error that says what to install."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:  # torch imports tensorboard's protobufs itself
        raise NodegraphError(f"--log-dir / training.log_dir needs the tensorboard package "
                             f"({e}); install it with pip install 'nodegraph[tracking]'") from e
    # the writer's thread flushes every few seconds: a live TensorBoard follows the run, and
    # a fast epoch does not wait for the disk
    return SummaryWriter(log_dir=str(log_dir), flush_secs=5)


class TensorBoard(Callback):
    """Writes one run's numbers into `log_dir` (created when the run starts)."""

    def __init__(self, log_dir: str | Path, graph: Graph, opts: dict[str, Any]):
        self.log_dir = Path(log_dir)
        self.graph, self.opts = graph, opts
        self.writer: Any = None  # a SummaryWriter once the run starts (tensorboard is lazy)
        self.trainer: Any = None
        self.every = 0  # steps between weight histograms; 0: none

    def attach(self, events: Emitter) -> None:
        """Listen for step losses, probe frames and the final numbers; called before the
        trainer is built, so the trainer probes (within `probe_budget`) for the histograms."""
        events.subscribe(self._event, StepEnded, ProbeFrame)
        events.subscribe(self._finished, RunFinished)

    def on_run_start(self, trainer) -> None:
        self.trainer = trainer
        self.writer = summary_writer(self.log_dir)
        per_epoch = self.opts["histograms_per_epoch"]  # resolved: its default filled in
        steps = trainer.primary.num_batches("train") if trainer.primary is not None else 0
        self.every = max(1, steps // per_epoch) if per_epoch and steps else 0
        add_graph(self.writer, trainer.c)

    def on_step_end(self, trainer, values: dict) -> None:
        if self.every and trainer.state.global_step % self.every == 0:
            self._weights(trainer)

    def _weights(self, trainer) -> None:
        """Histograms of every weight and its gradient, at the global step."""
        w, step = self.writer, trainer.state.global_step
        for name, p in trainer.c.module.named_parameters():
            name = name.removeprefix("blocks.")
            w.add_histogram(f"weights/{name}", p.detach().float().cpu(), step)
            if p.grad is not None:
                w.add_histogram(f"weight_grads/{name}", p.grad.detach().float().cpu(), step)

    def _event(self, event) -> None:
        if self.writer is None:
            return
        step = self.trainer.state.global_step
        if isinstance(event, StepEnded):
            if event.loss is not None:
                self.writer.add_scalar("step/loss", event.loss, step)
        else:
            self._probe(event)

    def _probe(self, frame: ProbeFrame) -> None:
        w, step = self.writer, frame.step
        for node, ports in frame.outputs.items():
            for port, s in ports.items():
                n = math.prod(s.shape)
                add_histogram(w, f"activations/{node}.{port}", s.hist, step,
                              n * s.mean, n * (s.std ** 2 + s.mean ** 2))
        for node, grads in frame.grads.items():
            for port, g in grads.items():
                add_histogram(w, f"gradients/{node}.{port}", g.hist, step, None, g.norm ** 2)
        for name, p in frame.params.items():
            if math.isfinite(p.grad_norm):
                w.add_scalar(f"grad_norm/{name}", p.grad_norm, step)

    def on_epoch_end(self, trainer) -> None:
        entry, w = trainer.state.history[-1], self.writer
        epoch, step = entry["epoch"], trainer.state.global_step
        w.add_scalar("epoch", epoch, step)
        values = {f"{split}/{key}": value for split in ("train", "val")
                  for key, value in numbers(entry[split]).items()}
        values.update({f"lr/{node}": lr for node, lr in entry["lr"].items()})
        for tag, value in values.items():
            w.add_scalar(tag, value, step)
            w.add_scalar(f"by_epoch/{tag}", value, epoch)

    def _finished(self, event: RunFinished) -> None:
        """The final numbers, and the hyperparameters with them; then the file is closed."""
        from torch.utils.tensorboard.summary import hparams as hparam_summaries

        if self.writer is None:
            return
        step = self.trainer.state.global_step if self.trainer is not None else 0
        final = {f"final/{split}/{key}": v for split, stats in event.final.items()
                 for key, v in numbers(stats).items()}
        for tag, value in final.items():
            self.writer.add_scalar(tag, value, step)
        last = event.history[-1] if event.history else {}
        metrics = {f"{split}/{key}": v for split in ("train", "val")
                   for key, v in numbers(last.get(split, {})).items()}
        file_writer = self.writer._get_file_writer()
        # into this run's own file (SummaryWriter.add_hparams would open a sub-run), with
        # metrics naming the scalars above, so the HParams tab reads the curves themselves
        for summary in hparam_summaries(hyperparameters(self.graph, self.opts),
                                        {**metrics, **final}):
            file_writer.add_summary(summary)
        self._close()

    def on_exception(self, trainer, error: BaseException) -> None:
        self._close()

    def _close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def add_graph(writer, compiled) -> None:
    """The graph as TensorBoard's Graphs tab draws it: a node per block (its id, its block
    type as the op, its output shapes as an attribute), an input per wire."""
    from tensorboard.compat.proto.attr_value_pb2 import AttrValue
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.graph_pb2 import GraphDef
    from tensorboard.compat.proto.node_def_pb2 import NodeDef
    from tensorboard.compat.proto.versions_pb2 import VersionDef

    graph, report = compiled.exec_graph or compiled.graph, compiled.report
    nodes = []
    for node in graph:
        spec = report.specs.get(node.id)
        shapes = ", ".join(f"{p.name} {report.shape_text(node.id, p.name)}"
                           for p in (spec.outputs if spec else ())
                           if (node.id, p.name) in report.outputs)
        nodes.append(NodeDef(
            name=node.id, op=node.type, input=sorted({e.src for e in graph.edges_into(node.id)}),
            attr={"shapes": AttrValue(s=shapes.encode())}))
    graph_def = GraphDef(node=nodes, versions=VersionDef(producer=22))
    writer._get_file_writer().add_event(Event(graph_def=graph_def.SerializeToString()))


def add_histogram(writer, tag: str, hist: Histogram, step: int, total: float | None,
                  squares: float) -> None:
    """A probe's 32-bin histogram as TensorBoard's; `total` (sum of values) from the bin
    centres when the probe did not measure it."""
    counts = hist.counts
    n = sum(counts)
    if not n or not (math.isfinite(hist.lo) and math.isfinite(hist.hi)):
        return
    width = (hist.hi - hist.lo) / len(counts)
    limits = [hist.lo + width * (i + 1) for i in range(len(counts))]
    if total is None:
        total = sum(c * (hist.lo + width * (i + 0.5)) for i, c in enumerate(counts))
    writer.add_histogram_raw(tag, hist.lo, hist.hi, n, total, squares, limits, counts, step)


def numbers(stats: dict[str, Any]) -> dict[str, float]:
    """The plain numbers of an epoch's stats (metrics such as a confusion matrix are not)."""
    return {k: float(v) for k, v in stats.items()
            if isinstance(v, Real) and not isinstance(v, bool)}


def hyperparameters(graph: Graph, opts: dict[str, Any]) -> dict[str, Any]:
    """`node.param` for each number, text or flag param of a node (defaults included),
    `training.key` for each such training setting: what the HParams tab can compare."""
    def plain(v) -> bool:
        return isinstance(v, (bool, str)) or (isinstance(v, Real) and math.isfinite(v))

    found = {}
    for n in graph.nodes.values():
        spec = graph.registry.get(n.type) if n.type in graph.registry else None
        defaults = {p.name: p.default for p in spec.params} if spec is not None else {}
        found.update({f"{n.id}.{k}": v for k, v in {**defaults, **n.params}.items()
                      if plain(v)})
    found.update({f"training.{k}": v for k, v in opts.items() if plain(v)})
    return found
