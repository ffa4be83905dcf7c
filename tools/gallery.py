"""A picture of every example as a new user first sees it: opened at 1600x1000 and fitted.

    QT_QPA_PLATFORM=offscreen python tools/gallery.py [OUT_DIR] [--sheet docs/gallery.png]
        [--size 1600x1000] [--only NAME ...] [--layout] [--check]

Writes OUT_DIR/<example>.png (the canvas of the real main window, after View > Fit) and a
contact sheet of all of them with each file's name and fitted zoom, and prints each one's
smallest title cap height on screen (9 px or more is readable). Look at each one: every
card's title must be readable, no wire may run under a card, no label may sit on another.
`--layout` presses Auto-layout first (to judge the layout rather than the saved positions).
`--check` also lists what the eye should catch: wires through cards, shape labels on a
card, on a port dot or on another label; and every card that does not lie wholly inside the
view as the window opened it (before this tool fits it again), which makes the exit status 1.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtCore import QRectF, QSettings, Qt  # noqa: E402
from PySide6.QtGui import QColor, QFont, QImage, QPainter  # noqa: E402

from nodegraph.gui.base.application import application  # noqa: E402
from nodegraph.gui.canvas.canvas_check import defects, unseen  # noqa: E402
from nodegraph.gui.canvas.node_item import CAP  # noqa: E402
from nodegraph.gui.canvas.wire_item import LABEL_LOD  # noqa: E402
from nodegraph.gui.document.files import example_files  # noqa: E402
from nodegraph.gui.shell.main_window import MainWindow  # noqa: E402

THUMB_W, THUMB_H, CAPTION = 480, 300, 22
CUT: list[str] = []  # example:card for each card cut off (with --check)


def cut_off(window) -> list[str]:
    """The cards not wholly inside the canvas as it is shown (its viewport, in the scene)."""
    view = window.view
    shown = view.mapToScene(view.viewport().rect()).boundingRect()
    return sorted(n for n, item in window.scene.nodes.items()
                  if not shown.contains(item.sceneBoundingRect()))


def shoot(path: Path, out: Path, size: tuple[int, int], layout: bool, tmp: Path,
          check: bool = False) -> tuple[float, float]:
    """Open `path` in a fresh window, fit it, save the canvas to `out`; the fitted zoom and
    the smallest card title's cap height on screen, in pixels (with `check`, print the
    defects found)."""
    app = application()
    settings = QSettings(str(tmp / "settings.ini"), QSettings.Format.IniFormat)
    window = MainWindow(str(path), settings=settings, recovery_dir=tmp / "rec")
    window.resize(*size)
    window.show()
    for _ in range(5):
        app.processEvents()
    window.validator.wait()
    for _ in range(5):
        app.processEvents()
    if check:
        for node in cut_off(window):
            print(f"  {path.stem}: card {node} is not wholly inside the opened view")
            CUT.append(f"{path.stem}:{node}")
    if layout:
        window.edit_actions.auto_layout()
    window.view.fit()
    window.validator.wait()
    for _ in range(10):
        app.processEvents()
    window.view.grab().save(str(out))
    zoom = window.view.zoom
    smallest = min((i.title_px * CAP for i in window.scene.nodes.values()), default=0.0)
    for line in defects(window.scene, zoom >= LABEL_LOD) if check else []:
        print(f"  {path.stem}: {line}")
    if check:
        wires, ports = unseen(window.scene, zoom)
        print(f"  {path.stem}: {len(wires)} wire(s) without a visible shape, {len(ports)} "
              "port(s) without a visible name" + "".join(f"\n    {x}" for x in wires + ports))
    window.doc.undo_stack.setClean()
    window.close()
    window.deleteLater()
    app.processEvents()
    return zoom, smallest


def contact_sheet(shots: list[tuple[str, Path, float]], out: Path) -> None:
    """All the pictures, scaled down, in a grid, each captioned with its name and zoom."""
    cols = 4
    rows = math.ceil(len(shots) / cols)
    sheet = QImage(cols * THUMB_W, rows * (THUMB_H + CAPTION), QImage.Format.Format_RGB32)
    sheet.fill(QColor("#101216"))
    painter = QPainter(sheet)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    font = QFont("DejaVu Sans")
    font.setPixelSize(13)
    painter.setFont(font)
    for i, (name, png, zoom) in enumerate(shots):
        x, y = (i % cols) * THUMB_W, (i // cols) * (THUMB_H + CAPTION)
        image = QImage(str(png)).scaled(THUMB_W - 6, THUMB_H - 6,
                                        Qt.AspectRatioMode.KeepAspectRatio,
                                        Qt.TransformationMode.SmoothTransformation)
        painter.drawImage(x + 3, y + CAPTION, image)
        painter.setPen(QColor("#e6e9ee"))
        painter.drawText(QRectF(x + 6, y, THUMB_W - 12, CAPTION), Qt.AlignmentFlag.AlignVCenter,
                         f"{name}  ({zoom:.0%})")
    painter.end()
    out.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(str(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="gallery")
    parser.add_argument("--sheet", default="docs/gallery.png")
    parser.add_argument("--size", default="1600x1000")
    parser.add_argument("--only", nargs="*", help="example names (without .json)")
    parser.add_argument("--layout", action="store_true", help="press Auto-layout first")
    parser.add_argument("--check", action="store_true",
                        help="list wires under cards and labels on cards, dots, labels; count "
                        "wires without a visible shape and ports without a visible name")
    args = parser.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    application()
    shots = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in example_files():
            if args.only and path.stem not in args.only:
                continue
            png = out / f"{path.stem}.png"
            zoom, cap = shoot(path, png, size, args.layout, Path(tmp), args.check)
            shots.append((path.stem, png, zoom))
            flag = "" if cap >= 9.0 else "  TITLES TOO SMALL"
            print(f"{png}  zoom {zoom:.0%}  smallest title cap {cap:.1f} px{flag}")
    if shots and args.sheet:
        contact_sheet(shots, Path(args.sheet))
        print(args.sheet)
    if CUT:
        print(f"{len(CUT)} card(s) cut off in the opened view: {', '.join(CUT)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
