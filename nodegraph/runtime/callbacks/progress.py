"""`train(..., progress=True)`: a progress bar and the loss curves while a run trains.

In a Jupyter notebook one output cell holds an HTML progress bar, the latest epoch's
numbers and a live SVG plot of the train and val loss per epoch (`nodegraph.runtime.
loss_plot`), updated in place through IPython's display handles — no widgets or matplotlib
needed. A notebook redraw is throttled (`notebook_interval`, 0.5 s: a handful per second at
most, however short the epochs) and the plot holds a fixed number of points however long the
run (`loss_plot` thins the curves), so the display costs within the noise of a run of tiny
epochs (`benchmarks/progress_overhead.py`). Elsewhere it is one plain text line: rewritten
in place on a terminal, one line every few epochs (about 20 lines a run) when the output
goes to a file or a pipe, so logs stay greppable. IPython is looked up only when the run
starts, and only where it is already imported (a kernel imports it).
"""

from __future__ import annotations

import sys
import time
from html import escape
from typing import Any, TextIO

from nodegraph.model.errors import NodegraphError
from nodegraph.runtime.callbacks.base import Callback
from nodegraph.runtime.loss_plot import loss_plot

MODES = ("auto", "notebook", "text")
BAR = 24  # characters of the text bar
LINES = 20  # lines a run writes, at most, when its output is no terminal


def in_notebook() -> bool:
    """True inside a Jupyter kernel (an IPython shell with a kernel; the terminal IPython
    has none)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


def mode_of(progress: bool | str) -> str | None:
    """The display `train`'s `progress` argument asks for: None (off), notebook or text."""
    if progress is False or progress is None:
        return None
    choice = "auto" if progress is True else progress
    if choice not in MODES:
        raise NodegraphError(f"progress={progress!r}: use True, False, or one of "
                             f"{', '.join(repr(m) for m in MODES)}")
    if choice == "auto":
        return "notebook" if in_notebook() else "text"
    return choice


def numbers(stats: dict[str, Any]) -> dict[str, float]:
    """The plain numbers among an epoch's stats (metrics may also be tensors or dicts)."""
    out = {}
    for k, v in stats.items():
        if isinstance(v, bool):
            continue
        try:
            out[k] = float(v)
        except (TypeError, ValueError):
            continue
    return out


class Progress(Callback):
    """Shows where a run stands: epochs and steps done, the time left, the last epoch's
    numbers and (in a notebook) the loss curves. `min_interval` seconds at least between
    two redraws within an epoch."""

    def __init__(self, mode: str = "text", stream: TextIO | None = None,
                 min_interval: float = 0.2, notebook_interval: float = 0.5):
        if mode not in ("notebook", "text"):
            raise NodegraphError(f"progress display {mode!r}: use 'notebook' or 'text'")
        self.mode, self.min_interval = mode, min_interval
        # a notebook redraw sends the whole cell to the browser: a few a second at most
        self.epoch_interval = notebook_interval if mode == "notebook" else 0.0
        self.stream = stream if stream is not None else sys.stderr
        self.total = self.steps = self.first = 0
        self.epoch = self.step = 0
        self.began = self.last_draw = 0.0
        self.curves: dict[str, list[tuple[float, float]]] = {}
        self.latest: dict[str, dict[str, float]] = {}
        self.pending: tuple[dict, dict] | None = None  # the last epoch's stats, not yet read
        self.handle: Any = None
        self.html: Any = None
        self.open_line = False  # a text line waits for its end (terminals only)

    # -- hooks ---------------------------------------------------------------------------

    def on_run_start(self, trainer) -> None:
        state = trainer.state
        self.total = state.last  # a continued fit's last epoch: 80 for 10 more after 70
        self.first = state.epoch  # a resumed run starts where its checkpoint left off
        self.epoch = state.epoch
        primary = trainer.primary
        self.steps = primary.num_batches("train") if primary is not None else 0
        self.began = time.monotonic()
        if self.mode == "notebook":
            try:
                from IPython.display import HTML, display
            except ImportError as e:
                raise NodegraphError("progress='notebook' needs IPython (run it in Jupyter),"
                                     f" or use progress='text' ({e})") from e
            self.html = HTML
            self.handle = display(HTML(self._html("starting")), display_id=True)
        else:
            self._text("starting")

    def on_epoch_start(self, trainer) -> None:
        self.epoch, self.step = trainer.state.epoch, 0

    def on_step_end(self, trainer, values: dict) -> None:
        self.step += 1
        if self.steps <= 1:
            return  # one step an epoch: the epoch's end draws (tiny epochs pay nothing here)
        now = time.monotonic()
        if now - self.last_draw >= max(self.min_interval, self.epoch_interval):
            self.last_draw = now
            self._draw("training")

    def on_epoch_end(self, trainer) -> None:
        state = trainer.state
        self.step = self.steps
        self.pending = (state.train, state.val)  # read into `latest` when next drawn
        epoch, curves = state.epoch, self.curves
        for name, stats in (("train loss", state.train), ("val loss", state.val)):
            loss = stats.get("loss")
            if loss is not None:
                points = curves.get(name)
                if points is None:
                    points = curves[name] = []
                points.append((epoch, float(loss)))
        now = time.monotonic()
        if now - self.last_draw >= self.epoch_interval:
            self.last_draw = now
            self._draw("training", epoch_done=True)

    def on_run_end(self, trainer) -> None:
        state = trainer.state
        if state.cancelled:
            word = "stopped"
        elif state.stopped_early:
            word = "stopped early"
        else:
            word = "done"
        self._draw(word, final=True)

    def on_exception(self, trainer, error: BaseException) -> None:
        self._draw(f"failed: {type(error).__name__}", final=True)

    # -- drawing -------------------------------------------------------------------------

    def _draw(self, word: str, epoch_done: bool = False, final: bool = False) -> None:
        if self.pending is not None:
            train, val = self.pending
            self.latest, self.pending = {"train": numbers(train), "val": numbers(val)}, None
        if self.mode == "notebook":
            if self.handle is not None:
                self.handle.update(self.html(self._html(word)))
        else:
            self._text(word, epoch_done, final)

    def fraction(self) -> float:
        """The share of the run's steps done (epochs when a run has no steps)."""
        epochs = self.total - self.first
        if epochs <= 0:
            return 1.0
        done = self.epoch - self.first - 1 + (self.step / self.steps if self.steps else 1.0)
        return min(1.0, max(0.0, done / epochs))

    def summary(self) -> str:
        """The last epoch's numbers: `train loss 0.12  accuracy 0.9 | val loss 0.2 ...`."""
        parts = []
        for split, stats in self.latest.items():
            if stats:
                parts.append(f"{split} " + "  ".join(f"{k} {v:.4g}" for k, v in stats.items()))
        return " | ".join(parts)

    def timing(self) -> str:
        elapsed = time.monotonic() - self.began
        share = self.fraction()
        left = elapsed * (1 - share) / share if 0 < share < 1 else 0.0
        return f"{elapsed:.1f} s, ~{left:.0f} s left" if left >= 1 else f"{elapsed:.1f} s"

    def status(self, word: str) -> str:
        """`epoch 3/10  step 12/20  45%  (1.2 s, ~2 s left)  training` and the numbers."""
        head = f"epoch {max(self.epoch, self.first)}/{self.total}"
        if self.steps:
            head += f"  step {self.step}/{self.steps}"
        line = f"{head}  {self.fraction():4.0%}  ({self.timing()})  {word}"
        numbers_ = self.summary()
        return f"{line}  {numbers_}" if numbers_ else line

    def _text(self, word: str, epoch_done: bool = False, final: bool = False) -> None:
        bar = "#" * round(self.fraction() * BAR)
        line = f"[{bar:<{BAR}}] {self.status(word)}"
        tty = getattr(self.stream, "isatty", lambda: False)()
        if tty:
            self.stream.write("\r\x1b[K" + line + ("\n" if final else ""))
            self.open_line = not final
        elif final or (epoch_done and self.epoch < self.total
                       and (self.epoch - self.first) % self.every() == 0):
            self.stream.write(line + "\n")  # a log file or a pipe: whole lines, 20 at most
        self.stream.flush()

    def every(self) -> int:
        """Epochs between two lines written to a file or pipe: about 20 lines a run."""
        return max(1, -(-(self.total - self.first) // LINES))

    def _html(self, word: str) -> str:
        share = self.fraction()
        plot = loss_plot(self.curves) if self.curves else ""
        return (f"<div class='nodegraph-progress'>"
                f"<progress value='{share:.4f}' max='1' style='width: 420px'></progress> "
                f"<span>{escape(self.status(word))}</span>"
                f"<div>{plot}</div></div>")
