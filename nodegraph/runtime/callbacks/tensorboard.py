"""TensorBoard: a run written as event files a user's `tensorboard --logdir` shows.

Per epoch every numeric train/val stat (`train/loss`, `val/accuracy`) and each optimizer's
learning rate (`lr/<node>`); per step the loss the loop already reads every `loss_every`
steps (`step/loss`, so logging adds no device sync); at the end the graph's hyperparameters
(number, text and flag params of its nodes, the training settings) for the HParams tab, with
the last epoch's numbers as its metrics. While probes run, each probe frame becomes
histograms of outputs (`activations/<node>.<port>`) and of the gradients arriving at them
(`gradients/<node>.<port>`), and the parameters' gradient norms (`grad_norm/<node.param>`).

tensorboard is optional (the `tracking` extra): it is imported when a run asks for a log
folder, never by `import nodegraph`.
"""

from __future__ import annotations

import math
from numbers import Real
from pathlib import Path
from typing import Any

from nodegraph.model.errors import NodegraphError
from nodegraph.model.events import Emitter, StepEnded
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

    def attach(self, events: Emitter) -> None:
        """Listen for step losses and probe frames; called before the trainer is built, so
        the trainer probes (within `probe_budget`) for the histograms."""
        events.subscribe(self._event, StepEnded, ProbeFrame)

    def on_run_start(self, trainer) -> None:
        self.trainer = trainer
        self.writer = summary_writer(self.log_dir)

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
        epoch = entry["epoch"]
        for split in ("train", "val"):
            for key, value in numbers(entry[split]).items():
                w.add_scalar(f"{split}/{key}", value, epoch)
        for node, lr in entry["lr"].items():
            w.add_scalar(f"lr/{node}", lr, epoch)

    def on_run_end(self, trainer) -> None:
        from torch.utils.tensorboard.summary import hparams as hparam_summaries

        last = trainer.state.history[-1] if trainer.state.history else {}
        metrics = {f"{split}/{key}": v for split in ("train", "val")
                   for key, v in numbers(last.get(split, {})).items()}
        file_writer = self.writer._get_file_writer()
        # into this run's own file (SummaryWriter.add_hparams would open a sub-run), with
        # metrics naming the scalars above, so the HParams tab reads the curves themselves
        for summary in hparam_summaries(hyperparameters(self.graph, self.opts), metrics):
            file_writer.add_summary(summary)
        self._close()

    def on_exception(self, trainer, error: BaseException) -> None:
        self._close()

    def _close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


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
