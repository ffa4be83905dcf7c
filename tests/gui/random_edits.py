"""Random edit sequences driven by real key and mouse events, run in a process of its own.

`python -m tests.gui.random_edits FILE SEED...` opens FILE in an editor window and, for
each seed, makes a seeded sequence of edits a user makes (click, ctrl-click, drag a card,
Delete, copy, paste, duplicate, group, auto-layout, select all, undo, redo), then presses
Ctrl+Z until nothing is left to undo. After every step it checks:

- no exception escaped into Qt (a command raising out of `redo`, a slot failing);
- the state the undo stack is at matches, byte for byte and in its validation report, the
  state first met at that place in the history (so every undo and redo gives back exactly
  what was there);
- an edit that should change no results (a move, a grouping, a layout, a selection, a
  copy) leaves the graph validating as well as before;
- after undoing everything, the saved file is byte-identical to the file saved at the start.

It prints `seed N` before each sequence and exits non-zero on the first failure, naming
the seed and step: the test runs it in a subprocess so that a segfault, too, names its seed.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import traceback
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QPointF, QSettings, Qt  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from nodegraph.gui.base import theme  # noqa: E402
from nodegraph.gui.base.application import application  # noqa: E402
from nodegraph.gui.document.validator import validate_graph  # noqa: E402
from nodegraph.model.fileformat import dumps, save  # noqa: E402
from tests.gui.conftest import ScriptedPrompts  # noqa: E402
from tests.gui.driver import click_node, drag  # noqa: E402

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
NO = Qt.KeyboardModifier.NoModifier
QUIET = {"click", "ctrl_click", "drag", "group", "layout", "select_all", "copy"}


class Failed(AssertionError):
    pass


def problems(window) -> list[str]:
    """The graph's validation report as comparable lines (errors and warnings)."""
    report = validate_graph(window.doc.graph.copy())
    return sorted(f"{p.severity}:{p.location()}:{p.kind}: {p.message}" for p in report.problems)


def errors(lines: list[str]) -> int:
    return sum(1 for line in lines if line.startswith("error"))


def key(window, k, mods=NO) -> None:
    target = QApplication.focusWidget() or window.view.viewport()
    QTest.keyClick(target, k, mods)


def settle() -> None:
    for _ in range(3):
        QApplication.processEvents()


def step(window, rng: random.Random, names: list[int]) -> str:
    """One random user action through real events; returns its name."""
    ids = list(window.scene.nodes)
    actions = ["click", "ctrl_click", "drag", "delete", "copy", "paste", "duplicate",
               "group", "group", "layout", "select_all", "undo", "undo", "redo"]
    action = rng.choice(actions if ids else ["paste", "undo", "redo"])
    window.view.setFocus()
    if action in ("click", "ctrl_click") and ids:
        click_node(window, rng.choice(ids), CTRL if action == "ctrl_click" else None)
    elif action == "drag" and ids:
        item = window.scene.nodes[rng.choice(ids)]
        start = item.mapToScene(item.boundingRect().center().x(), 12)
        drag(window, start, start + QPointF(rng.randint(-200, 200), rng.randint(-150, 150)))
    elif action == "delete":
        key(window, Qt.Key.Key_Delete)
    elif action == "copy":
        key(window, Qt.Key.Key_C, CTRL)
    elif action == "paste":
        key(window, Qt.Key.Key_V, CTRL)
    elif action == "duplicate":
        key(window, Qt.Key.Key_D, CTRL)
    elif action == "group":
        names[0] += 1
        window.prompts.group = f"g{names[0]}"
        key(window, Qt.Key.Key_G, CTRL)
    elif action == "layout":
        key(window, Qt.Key.Key_L, CTRL)
    elif action == "select_all":
        key(window, Qt.Key.Key_A, CTRL)
    elif action == "undo":
        key(window, Qt.Key.Key_Z, CTRL)
    elif action == "redo":
        key(window, Qt.Key.Key_Z, CTRL | SHIFT)
    settle()
    return action


def run_sequence(window, path: Path, seed: int, steps: int, out: Path) -> None:
    rng = random.Random(seed)
    assert window.file_actions.open(str(path)), f"could not open {path}"
    settle()
    stack = window.doc.undo_stack
    original = dumps(window.doc.graph)
    seen: dict[int, tuple[str, list[str]]] = {0: (original, problems(window))}
    names = [0]
    for i in range(steps):
        before, had = problems(window), (stack.index(), stack.count())
        action = step(window, rng, names)
        where = f"seed {seed}, step {i} ({action})"
        if caught:
            raise Failed(f"{where}: an exception escaped into Qt:\n{caught[0]}")
        index, text, now = stack.index(), dumps(window.doc.graph), problems(window)
        if os.environ.get("RANDOM_EDITS_TRACE"):
            print(where, index, stack.count(), flush=True)
        if action in ("undo", "redo") or (index, stack.count()) == had:
            # nothing pushed: the file must be what it was at this place in the history
            if (text, now) != seen[index]:
                raise Failed(f"{where}: the state at undo index {index} differs from the "
                             f"one first met there:\n{_diff(seen[index][0], text)}\n"
                             f"problems then {seen[index][1]}, now {now}")
        else:
            if action in QUIET and errors(now) > errors(before):
                raise Failed(f"{where}: validation got worse: {before} -> {now}")
            seen = {k: v for k, v in seen.items() if k < index}  # a push ends the redo branch
            seen[index] = (text, now)
    for _ in range(stack.count() + 5):
        if stack.index() == 0:
            break
        window.view.setFocus()
        key(window, Qt.Key.Key_Z, CTRL)
        settle()
    if caught:
        raise Failed(f"seed {seed}, undoing all: an exception escaped into Qt:\n{caught[0]}")
    if stack.index() != 0:
        raise Failed(f"seed {seed}: Ctrl+Z stopped at undo index {stack.index()}")
    saved = out / f"after_{seed}.json"
    save(window.doc.graph, saved)
    if saved.read_bytes() != original.encode("utf-8"):
        raise Failed(f"seed {seed}: after undoing everything the file differs:\n"
                     f"{_diff(original, saved.read_text(encoding='utf-8'))}")


def _diff(a: str, b: str) -> str:
    import difflib

    return "\n".join(list(difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm=""))[:30])


caught: list[str] = []


def main(argv: list[str]) -> int:
    path, steps, seeds = Path(argv[0]), int(argv[1]), [int(s) for s in argv[2:]]
    def hook(*exc) -> None:  # Qt calls it for an exception out of a slot or a virtual
        caught.append("".join(traceback.format_exception(*exc)))
        print(caught[-1], file=sys.stderr, flush=True)
    sys.excepthook = hook
    from nodegraph.gui.shell.main_window import MainWindow
    from nodegraph.model.spec import default_registry

    app = application()
    theme.apply(app)
    with tempfile.TemporaryDirectory() as tmp:
        settings = QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat)
        prompts = ScriptedPrompts()
        window = MainWindow(None, registry=default_registry(), settings=settings,
                            prompts=prompts, recovery_dir=Path(tmp) / "recovery",
                            autosave_ms=3_600_000)
        window.resize(1600, 1000)
        window.show()
        QTest.qWaitForWindowExposed(window)
        for seed in seeds:
            print(f"seed {seed}", flush=True)
            try:
                run_sequence(window, path, seed, steps, Path(tmp))
            except Failed as e:
                print(f"FAILED {e}", flush=True)
                return 1
            window.doc.undo_stack.clear()
        window.close()
    print("all passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
