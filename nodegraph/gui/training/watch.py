"""Watch it learn: the animation, badges, timeline and step-through, joined to one window.

`install(window)` adds two docks (Animation: the timeline and the wave's controls;
Step-through: one batch walked node by node), a Step action (F10) in the Run menu and the
toolbar, and File > Open probe recording…, and listens to the window's training runner:

- each probe frame of a run is recorded on the timeline, played as a wave (when the
  timeline follows the run) and turned into node badges;
- a run stopped by NaN/Inf (the trainer names the node where it first appeared) leaves a
  NaN/Inf badge on that node until the next run;
- a new run clears the previous run's frames, wave and badges.

Nothing here runs on the trainer's thread: frames arrive as queued events, and the wave
plays from a timer, dropping frames it has no time for.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QToolBar

from nodegraph.gui.base.later import later
from nodegraph.gui.canvas.badges import Badge, diagnose, nonfinite_badge
from nodegraph.gui.canvas.overlays import CanvasMarks
from nodegraph.gui.training.animation import WaveAnimator
from nodegraph.gui.training.preview import preview_error
from nodegraph.gui.training.stepthrough import StepPanel, StepTrace
from nodegraph.gui.training.timeline import TimelinePanel
from nodegraph.model.events import NodeFailed, RunFinished, RunStarted
from nodegraph.runtime.probe_frames import ProbeFrame, read_frames

compiler = later("nodegraph.runtime.compile")  # torch: imported by the first Step

NONFINITE_STOP = "NaN or infinite"  # in the trainer's message when it stops a run for NaN/Inf


class Watch(QObject):
    """The watch-it-learn parts of one main window."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.marks = CanvasMarks(window.scene)
        self.animator = WaveAnimator(self.marks, self)
        self.timeline = TimelinePanel()
        self.steps = StepPanel(self.marks)
        self.frame_badges: dict[str, list[Badge]] = {}
        self.failed: dict[str, list[Badge]] = {}  # sticky until the next run
        self._add_docks()
        self._add_actions()
        window.runner.listen(self.on_event, ProbeFrame, RunStarted, NodeFailed, RunFinished)
        self.timeline.frame_chosen.connect(self.show_frame)
        self.timeline.live_changed.connect(self._follow)
        self.timeline.paused_changed.connect(self.animator.set_paused)
        self.timeline.speed_changed.connect(self.animator.set_speed)
        self.timeline.open_requested.connect(lambda: self.open_recording())
        self.animator.step_started.connect(self._on_step)
        self.steps.step_requested.connect(self.step)
        window.doc.graph_replaced.connect(self._reset)

    def _add_docks(self) -> None:
        w = self.window
        area = Qt.DockWidgetArea.BottomDockWidgetArea
        w.add_dock("animation", "Animation", self.timeline, area, tab_with="log")
        w.add_dock("stepthrough", "Step-through", self.steps, area, tab_with="log")
        w.docks["problems"].raise_()

    def _add_actions(self) -> None:
        w = self.window
        step = QAction("S&tep Through One Batch", w)
        step.setShortcut(QKeySequence("F10"))
        step.setToolTip("run one batch and walk it node by node, forward then backward (F10)")
        step.setIconText("Step")
        step.triggered.connect(lambda *_: self.step())
        record = QAction("Open &Probe Recording…", w)
        record.setStatusTip("replay the activations and gradients of a --probe-out file")
        record.triggered.connect(lambda *_: self.open_recording())
        w.actions_by_name.update({"step": step, "open_probes": record})
        menus = {a.text().replace("&", ""): a.menu() for a in w.menuBar().actions()}
        if menus.get("Run") is not None:
            menus["Run"].addAction(step)
        if menus.get("File") is not None:
            file_menu = menus["File"]
            before = next((a for a in file_menu.actions() if a.isSeparator()), None)
            file_menu.insertAction(before, record)
        bar = w.findChild(QToolBar, "main_toolbar")
        if bar is not None and w.actions_by_name["stop"] in bar.actions():
            actions = bar.actions()  # Step goes right after Train, Pause, Stop
            after = actions.index(w.actions_by_name["stop"]) + 1
            bar.insertAction(actions[after] if after < len(actions) else None, step)

    # -- training events -------------------------------------------------------------------

    def on_event(self, event) -> None:
        if isinstance(event, ProbeFrame):
            self.timeline.add(event)
            self.frame_badges = self._badges(event)
            self._paint_badges()
            if self.timeline.live.isChecked():
                self.animator.push(event)
        elif isinstance(event, RunStarted):
            self._reset()
        elif isinstance(event, RunFinished) and event.cancelled:
            # Stop finishes cleanly: the last wave is not left painted on the wires (the
            # timeline keeps its frames to replay, the plots keep their curves)
            self.animator.stop()
            self.marks.clear()
        elif isinstance(event, NodeFailed) and NONFINITE_STOP in event.message:
            node = self.marks.canvas_node(event.node)
            if node is not None:
                self.failed = {node: [nonfinite_badge("output")]}
                self._paint_badges()

    def _badges(self, frame: ProbeFrame) -> dict[str, list[Badge]]:
        types = {n: node.type for n, node in self.window.doc.graph.nodes.items()}
        out: dict[str, list[Badge]] = {}
        for node, badges in diagnose(frame, types).items():
            canvas = self.marks.canvas_node(node)
            if canvas is not None:
                out.setdefault(canvas, []).extend(b for b in badges
                                                  if b not in out.get(canvas, []))
        return out

    def _paint_badges(self) -> None:
        merged = {n: list(b) for n, b in self.frame_badges.items()}
        for node, badges in self.failed.items():
            kept = [b for b in merged.get(node, []) if b.kind != "nonfinite"]
            merged[node] = badges + kept
        self.marks.set_badges(merged)

    def _reset(self) -> None:
        self.animator.stop()
        self.animator.dropped = 0
        self.timeline.reset()
        self.frame_badges, self.failed = {}, {}
        self.marks.set_badges({})

    def _on_step(self, step: int, phase: str, node: str) -> None:
        if self.animator.pos == 0:  # once per wave is plenty for a status line
            self.timeline.show_info(self.animator.frame, self.animator.dropped)

    # -- timeline --------------------------------------------------------------------------

    def show_frame(self, frame: ProbeFrame) -> None:
        """Replay one recorded frame: its wave and its badges."""
        self.frame_badges = self._badges(frame)
        self._paint_badges()
        self.animator.play(frame)
        self.timeline.show_info(frame, self.animator.dropped)

    def _follow(self, live: bool) -> None:
        if live and len(self.timeline.log):
            self.animator.play(self.timeline.log[len(self.timeline.log) - 1])

    def open_recording(self, path: str | None = None) -> bool:
        """Load a `--probe-out` file into the timeline and show its first frame."""
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self.window, "Open probe recording", "",
                                                  "Probe recordings (*.jsonl);;All files (*)")
            if not path:
                return False
        try:
            frames = list(read_frames(path))
        except (OSError, ValueError, KeyError, TypeError) as e:
            self.window.notify(f"Cannot read {path}: {e}")
            return False
        self.timeline.reset(frames, Path(path).name)
        self.window.docks["animation"].raise_()
        self.window.notify(f"{len(frames)} probe frame(s) from {Path(path).name}")
        return True

    # -- step-through ----------------------------------------------------------------------

    def step(self) -> bool:
        """Trace one batch (trained weights when the last run trained this graph)."""
        w = self.window
        w.docks["stepthrough"].raise_()
        if w.runner.running:
            self.steps.show_message("Stop the run first: Step traces the graph's weights as "
                                    "they are.")
            return False
        trained = w.runner.result is not None and w.runner.revision == w.doc.revision
        try:
            compiled = w.runner.result.compiled if trained else compiler.compile_graph(w.doc.graph)
            trace = StepTrace.of(compiled, list(w.scene.wires))
        except Exception as e:  # a graph that cannot run yet: say why, in the panel
            self.steps.show_message(preview_error(e))
            return False
        self.animator.stop()
        self.steps.show_trace(trace)
        return True


def install(window) -> Watch:
    return Watch(window)
