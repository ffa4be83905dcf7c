"""The start page: what an empty canvas shows instead of a blank grid.

The example gallery (a thumbnail of each graph, drawn from the graph itself by the
canvas's own painting code offscreen, and one line of what it teaches, from
`examples/README.md`), the recent files, and the three gestures that start a graph. It
lies over the canvas while the graph has no nodes, and hides as soon as one is added or a
file is opened. Thumbnails are drawn a few at a time while the page is shown, so opening
the editor never waits for them, and are cached on disk by file content.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QIcon, QImage, QPainter, QPixmap
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QVBoxLayout,
    QWidget,
)

from nodegraph.gui.base import theme
from nodegraph.gui.canvas.image_export import graph_rect
from nodegraph.gui.canvas.scene import GraphScene
from nodegraph.gui.document import files
from nodegraph.gui.document.document import Document
from nodegraph.gui.document.file_actions import read_graph

THUMB = QSize(200, 120)
PATH_ROLE = Qt.ItemDataRole.UserRole
GESTURES = (
    ("Tab", "search the blocks and add one at the cursor (or double-click the canvas)"),
    ("Drag a port", "drop the wire on empty canvas to add a block that fits, wired in"),
    ("F10", "walk one batch through the graph, node by node (F5 trains)"),
)


def descriptions(readme: Path | None = None) -> dict[str, str]:
    """One line per example file, from the first cell of `examples/README.md`'s tables
    that names it (the 'What it shows' column, up to its first sentence or colon)."""
    readme = readme or files.examples_dir() / "README.md"
    try:
        text = readme.read_text(encoding="utf-8")
    except OSError:
        return {}
    found: dict[str, str] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        what = _first_sentence(cells[1])
        for name in re.findall(r"`([\w.-]+\.json)`", cells[0]):
            found.setdefault(name, what)
    return found


def _first_sentence(cell: str) -> str:
    """The cell's first sentence, without a leading citation ("Table 1, L20-24: ...")."""
    cell = re.sub(r"`([^`]*)`", r"\1", cell).strip()
    head, colon, rest = cell.partition(": ")
    if colon and len(head) < 40 and re.search(r"\d", head) and rest:
        cell = rest[0].upper() + rest[1:]
    cut = re.split(r"(?<=[a-z0-9)])[.;] ", cell, maxsplit=1)[0].rstrip(".")
    return cut if len(cut) <= 110 else cut[:107].rsplit(" ", 1)[0] + "…"


def render_thumbnail(path: str | Path, registry=None, size: QSize = THUMB) -> QImage:
    """The graph in `path` drawn small: its cards and wires fitted into `size`."""
    image = QImage(size, QImage.Format.Format_ARGB32)
    image.fill(QColor(theme.CANVAS))
    doc = Document(read_graph(path, registry))
    scene = GraphScene(doc)
    painter = QPainter(image)
    try:
        painter.setRenderHints(QPainter.RenderHint.Antialiasing
                               | QPainter.RenderHint.SmoothPixmapTransform)
        scene.render(painter, image.rect().toRectF().adjusted(6, 6, -6, -6), graph_rect(scene),
                     Qt.AspectRatioMode.KeepAspectRatio)
    finally:
        painter.end()
        scene.clear()
        scene.deleteLater()
        doc.deleteLater()
    return image


class ThumbnailCache:
    """Thumbnails by file content and theme: in memory (shared by the windows of one
    process, so each is drawn once), and as PNGs in `folder` (for the next start)."""

    memory: dict[str, QImage] = {}

    def __init__(self, folder: Path | None, registry=None):
        self.folder, self.registry = folder, registry

    def key(self, path: Path) -> str:
        digest = hashlib.sha1(path.read_bytes()).hexdigest()[:16]
        return f"{path.stem}-{digest}-{theme.CURRENT}"

    def get(self, path: Path) -> QImage | None:
        """The thumbnail of `path`, drawn now if no cache holds it; None if it cannot be
        read (a broken file still opens from the gallery, and says why)."""
        try:
            key = self.key(path)
        except OSError:
            return None
        disk = self.folder / f"{key}.png" if self.folder else None
        image = self.memory.get(key)
        if image is None and disk is not None and disk.exists():
            image = QImage(str(disk))
        if image is None or image.isNull():
            try:
                image = render_thumbnail(path, self.registry)
            except Exception:  # a file the gallery cannot draw: shown without a picture
                return None
        if disk is not None and not disk.exists():
            try:
                disk.parent.mkdir(parents=True, exist_ok=True)
                # str, not bytes: PySide6 refuses bytes at run time, though its stubs ask for them
                image.save(str(disk), "PNG")  # type: ignore[call-overload]
            except OSError:
                pass  # a read-only state folder: the memory cache still serves
        self.memory[key] = image
        return image


class StartPage(QFrame):
    """Gallery, recent files and the gestures to start, over the empty canvas."""

    open_requested = Signal(str)

    def __init__(self, parent: QWidget, recent: files.RecentFiles, registry=None,
                 cache_dir: Path | None = None):
        super().__init__(parent)
        self.setObjectName("start_page")
        self.setAutoFillBackground(True)
        self.recent = recent
        self.cache = ThumbnailCache(cache_dir, registry)
        self.texts = descriptions()
        title = QLabel("Start a graph")
        title.setProperty("role", "title")
        self.gestures = QLabel("<table cellspacing=3>" + "".join(
            f"<tr><td><b>{key}</b></td><td>{what}</td></tr>" for key, what in GESTURES)
            + "</table>")
        self.gestures.setWordWrap(True)
        self.gallery = QListWidget()
        self.gallery.setObjectName("gallery")
        self.gallery.setViewMode(QListWidget.ViewMode.IconMode)
        self.gallery.setIconSize(THUMB)
        self.gallery.setGridSize(QSize(THUMB.width() + 28, THUMB.height() + 62))
        self.gallery.setSpacing(4)
        self.gallery.setResizeMode(QListWidget.ResizeMode.Adjust)
        self.gallery.setMovement(QListWidget.Movement.Static)
        self.gallery.setWordWrap(True)
        self.gallery.setUniformItemSizes(True)
        self.gallery.itemActivated.connect(self._activated)
        self.gallery.itemClicked.connect(self._activated)
        self.recent_list = QListWidget()
        self.recent_list.setObjectName("recent")
        self.recent_list.setMaximumWidth(300)
        self.recent_list.itemActivated.connect(self._activated)
        self.recent_list.itemClicked.connect(self._activated)
        side = QVBoxLayout()
        heading = QLabel("Recent files")
        heading.setProperty("role", "title")
        side.addWidget(heading)
        side.addWidget(self.recent_list, 1)
        examples = QLabel("Examples — click one to open it")
        examples.setProperty("role", "title")
        main = QVBoxLayout()
        main.addWidget(title)
        main.addWidget(self.gestures)
        main.addWidget(examples)
        main.addWidget(self.gallery, 1)
        row = QHBoxLayout(self)
        row.setContentsMargins(18, 14, 18, 14)
        row.addLayout(main, 1)
        row.addLayout(side)
        self._todo: list[QListWidgetItem] = []
        self._timer = QTimer(self, interval=10)  # one picture per tick: input stays quick
        self._timer.timeout.connect(self._draw_next)
        self.fill()

    def fill(self) -> None:
        """List the examples (pictures follow, a few per event-loop turn) and recents."""
        self.gallery.clear()
        self._todo = []
        placeholder = QPixmap(THUMB)
        placeholder.fill(QColor(theme.CANVAS))
        for path in files.example_files():
            text = self.texts.get(path.name, "")
            short = text if len(text) <= 56 else text[:54].rsplit(" ", 1)[0] + " …"
            item = QListWidgetItem(QIcon(placeholder), path.stem + ("\n" + short if text else ""))
            item.setData(PATH_ROLE, str(path))
            item.setToolTip(f"{path.name}: {text}" if text else path.name)
            item.setTextAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
            item.setSizeHint(QSize(THUMB.width() + 20, THUMB.height() + 58))  # 3 text lines
            self.gallery.addItem(item)
            self._todo.append(item)
        self.recent_list.clear()
        for recent_path in self.recent.list():
            item = QListWidgetItem(Path(recent_path).name)
            item.setToolTip(recent_path)
            item.setData(PATH_ROLE, recent_path)
            self.recent_list.addItem(item)
        if not self.recent.list():
            self.recent_list.addItem("(none yet)")
        if self.isVisible():
            self._timer.start()

    def draw_all(self) -> None:
        """Draw every thumbnail now (tests and screenshots)."""
        while self._todo:
            self._draw_next()

    def _draw_next(self) -> None:
        if not self._todo:
            self._timer.stop()
            return
        item = self._todo.pop(0)
        image = self.cache.get(Path(item.data(PATH_ROLE)))
        if image is not None:
            item.setIcon(QIcon(QPixmap.fromImage(image)))

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._todo:
            self._timer.start()

    def hideEvent(self, event) -> None:
        self._timer.stop()
        super().hideEvent(event)

    def _activated(self, item: QListWidgetItem) -> None:
        path = item.data(PATH_ROLE)
        if path:
            self.open_requested.emit(path)

    def place(self) -> None:
        """Cover the parent (the canvas) fully."""
        parent = self.parentWidget()
        if parent is not None:
            self.setGeometry(parent.rect())
