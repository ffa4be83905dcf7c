"""Make the README's pictures of watching a model learn, offscreen.

    QT_QPA_PLATFORM=offscreen python tools/watch_screenshots.py docs/

- `animation_forward.png`: the XOR example trained a few hundred epochs, its last probe
  frame's wave stopped half-way through the forward pass (blue, width = activation size);
- `animation_backward.png`: the same frame half-way back (orange, width = gradient norm);
- `stepthrough.png`: the backprop appendix network of the notes stepped through one batch,
  stopped in the backward walk at the sigmoid, every value and gradient on its wire.

It drives the window as a user would (open, Auto-layout, Train, Pause the wave; Step,
Next) and grabs it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QSettings  # noqa: E402

from nodegraph.gui.base.application import application  # noqa: E402
from nodegraph.gui.document.files import examples_dir  # noqa: E402
from nodegraph.gui.shell.main_window import MainWindow  # noqa: E402


def open_window(path: Path, tmp: Path, size: tuple[int, int]) -> MainWindow:
    settings = QSettings(str(tmp / "settings.ini"), QSettings.Format.IniFormat)
    window = MainWindow(str(path), settings=settings, recovery_dir=tmp / "rec")
    window.resize(*size)
    for name in ("palette", "inspector", "preview"):  # the canvas is the subject here
        window.docks[name].hide()
    window.show()
    window.validator.wait()
    return window


def settle(window: MainWindow) -> None:
    for _ in range(20):
        application().processEvents()


def wave_pictures(out: Path, tmp: Path, size: tuple[int, int], epochs: int) -> None:
    window = open_window(examples_dir() / "xor.json", tmp, size)
    window.edit_actions.auto_layout()
    window.epochs.setValue(epochs)
    watch = window.watch
    watch.timeline.pause.setChecked(True)  # the pictures stop the wave where we choose
    window.start_training()
    window.runner.wait(600)
    frame = watch.timeline.log[len(watch.timeline.log) - 1]
    animator = watch.animator
    window.docks["animation"].raise_()
    window.plots.redraw()  # the curves up to the last epoch
    window.log.flush()
    settle(window)
    window.view.fit()
    animator.seek(frame, 0)  # loads the frame's steps
    forward = sum(1 for s in animator.steps if s.phase == "forward")
    for name, pos in (("animation_forward.png", forward // 2 + 1),
                      ("animation_backward.png", forward + (len(animator.steps) - forward) // 2)):
        animator.seek(frame, pos, 0.55)
        watch.timeline.show_info(frame)
        settle(window)
        window.grab().save(str(out / name))
        print(out / name)
    window.doc.undo_stack.setClean()
    window.close()


def stepthrough_picture(out: Path, tmp: Path, size: tuple[int, int]) -> None:
    window = open_window(examples_dir() / "backprop_appendix.json", tmp, size)
    window.docks["plots"].hide()  # nothing trained: the values panel gets the room
    chain = ["data", "hidden", "sigmoid", "out", "mse", "loss", "opt"]
    window.doc.set_positions({n: (i * 300.0, 0.0) for i, n in enumerate(chain)})  # room
    window.watch.step()
    panel = window.watch.steps
    while (panel.trace.stop.phase, panel.trace.record.node) != ("backward", "sigmoid"):
        panel.move(1)
    settle(window)
    window.view.fit()
    settle(window)
    window.grab().save(str(out / "stepthrough.png"))
    print(out / "stepthrough.png")
    window.doc.undo_stack.setClean()
    window.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder for the PNG files")
    parser.add_argument("--size", default="1500x900")
    parser.add_argument("--epochs", type=int, default=300)
    args = parser.parse_args()
    application()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    size = tuple(int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        wave_pictures(out, Path(tmp), size, args.epochs)
        stepthrough_picture(out, Path(tmp), (size[0] + 400, size[1]))


if __name__ == "__main__":
    main()
