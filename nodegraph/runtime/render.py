"""The CLI's view of a run: a progress bar and one log line per epoch, from the event stream.

Progress goes to stderr and the final result to stdout, so `nodegraph run ... > result.txt`
keeps the answer and drops the animation. The bar redraws at a fixed rate in rich's own
thread; step events only advance a counter.
"""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

from nodegraph.model.events import (
    Emitter,
    EpochEnded,
    Message,
    NodeFailed,
    RunFinished,
    RunStarted,
    StepEnded,
)
from nodegraph.model.sanitize import clean_lines


def _safe(text: object) -> str:
    """Text from a file for a rich console: control characters escaped, markup not obeyed."""
    return escape(clean_lines(text))


def format_stats(stats: dict[str, Any]) -> str:
    """`loss 0.0123  accuracy 0.9750` — numbers only; matrices and lists are left out."""
    parts = []
    for k, v in stats.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            continue
        parts.append(f"{k} {v:.4g}" if abs(v) >= 1e-3 or v == 0 else f"{k} {v:.3e}")
    return "  ".join(parts)


class ConsoleRenderer:
    """Subscribes to a run's events and draws them on the terminal."""

    def __init__(self, name: str, quiet: bool = False):
        name = _safe(name)  # the graph's name comes from its file
        self.name = name
        self.quiet = quiet
        # soft_wrap: a piped or logged line is never broken in the middle of a number
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)
        self.out = Console(file=sys.stdout, highlight=False, soft_wrap=True)
        self.progress: Progress | None = None
        self.epoch_task: TaskID | None = None
        self.step_task: TaskID | None = None

    def attach(self, events: Emitter) -> None:
        # only what it draws: a listener for everything would switch on the probes
        events.subscribe(self.on_event, RunStarted, StepEnded, EpochEnded, Message,
                         RunFinished, NodeFailed)

    def on_event(self, event: Any) -> None:
        if isinstance(event, NodeFailed):
            self.close()
            return
        if self.quiet:
            return
        if isinstance(event, RunStarted):
            self._start(event)
        elif (isinstance(event, StepEnded) and self.progress is not None
              and self.step_task is not None):
            self.progress.update(self.step_task, completed=event.step, total=event.steps)
        elif isinstance(event, EpochEnded):
            self._epoch(event)
        elif isinstance(event, Message) and event.level != "debug":
            self.err.print(f"[dim]{_safe(event.text)}[/dim]")
        elif isinstance(event, RunFinished):
            self.close()

    def _start(self, e: RunStarted) -> None:
        self.err.print(f"[bold]{self.name}[/bold]: {e.parameters:,} trainable parameters on "
                       f"{_safe(e.device)}, {e.epochs} epochs of {e.steps_per_epoch} steps")
        if not self.err.is_terminal:
            return  # a bar in a log file is noise; the epoch lines say enough
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeRemainingColumn(), console=self.err,
                                 transient=True)
        self.progress.start()
        self.epoch_task = self.progress.add_task("epochs", total=e.epochs,
                                                 completed=e.start_epoch - 1)
        self.step_task = self.progress.add_task("steps ", total=e.steps_per_epoch)

    def _epoch(self, e: EpochEnded) -> None:
        if self.progress is not None and self.epoch_task is not None:
            self.progress.update(self.epoch_task, completed=e.epoch)
        every = max(1, e.epochs // 20)  # about twenty lines for a long run
        if e.epoch % every and e.epoch != e.epochs and e.epoch != 1:
            return
        line = f"epoch {e.epoch:>{len(str(e.epochs))}}/{e.epochs}  train {format_stats(e.train)}"
        if e.val:
            line += f"  | val {format_stats(e.val)}"
        self.err.print(_safe(line))

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def print_final(self, result) -> None:
        status = ("cancelled" if result.cancelled else
                  "stopped early" if result.stopped_early else "done")
        epochs = len(result.history)
        self.out.print(f"{self.name}: {status} after {epochs} epoch(s); each split evaluated "
                       "with the final weights in eval mode (the epoch lines' train numbers "
                       "are means over the epoch's steps, while the weights changed)")
        for split, stats in result.final.items():
            self.out.print(f"  {_safe(split):<5} {_safe(format_stats(stats))}")
