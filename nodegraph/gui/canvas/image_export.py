"""File > Export Image: the whole graph as a PNG (raster, 2× for sharp slides) or an SVG
(vector, for papers), drawn by the canvas's own painting code.

The picture holds every card, wire, label and note on the theme's canvas colour, without
the grid, the selection highlight or any overlay that is not part of the graph.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QGraphicsItem

from nodegraph.gui.base import theme

MARGIN = 40.0
FORMATS = {".png": "PNG image", ".svg": "SVG vector image"}


def graph_rect(scene) -> QRectF:
    """The part of the canvas the graph occupies, with a margin."""
    rect = QRectF()
    for group in (scene.nodes.values(), scene.wires.values(), scene.notes.values()):
        for item in group:
            if item.isVisible():
                rect = rect.united(item.sceneBoundingRect())
    if rect.isNull():
        rect = QRectF(0, 0, 200, 120)
    return rect.adjusted(-MARGIN, -MARGIN, MARGIN, MARGIN)


def _paint(scene, painter: QPainter, target: QRectF, source: QRectF) -> None:
    selected = scene.selectedItems()
    for item in selected:  # the picture shows the graph, not what happens to be selected
        item.setSelected(False)
    # cards cache themselves as screen pixmaps: drawn afresh, an SVG gets text and vector
    # shapes and a 2x PNG gets sharp ones
    cached = {item: item.cacheMode() for item in scene.items()
              if item.cacheMode() != QGraphicsItem.CacheMode.NoCache}
    for item in cached:
        item.setCacheMode(QGraphicsItem.CacheMode.NoCache)
    far = scene.far_suspended() if hasattr(scene, "far_suspended") else None
    try:
        painter.fillRect(target, QColor(theme.CANVAS))
        painter.setRenderHints(QPainter.RenderHint.Antialiasing
                               | QPainter.RenderHint.TextAntialiasing)
        brush = scene.backgroundBrush()
        scene.setBackgroundBrush(Qt.BrushStyle.NoBrush)
        scene.render(painter, target, source, Qt.AspectRatioMode.KeepAspectRatio)
        scene.setBackgroundBrush(brush)
    finally:
        if far is not None:
            scene.far_resume(far)
        for item, mode in cached.items():
            item.setCacheMode(mode)
        for item in selected:
            item.setSelected(True)


def export_png(scene, path: str | Path, scale: float = 2.0) -> QSize:
    """Write the graph as a PNG at `scale` pixels per canvas unit; returns its size."""
    source = graph_rect(scene)
    size = QSize(max(1, round(source.width() * scale)), max(1, round(source.height() * scale)))
    image = QImage(size, QImage.Format.Format_ARGB32)
    image.fill(QColor(theme.CANVAS))
    painter = QPainter(image)
    try:
        _paint(scene, painter, QRectF(0, 0, size.width(), size.height()), source)
    finally:
        painter.end()
    # the format as str: PySide6 refuses bytes here at run time, though its stubs ask for them
    if not image.save(str(path), "PNG"):  # type: ignore[call-overload]
        raise OSError(f"could not write the image {path}: check the folder exists and "
                      "is writable")
    return size


def export_svg(scene, path: str | Path) -> QSize:
    """Write the graph as an SVG, one canvas unit per SVG unit; returns its size."""
    from PySide6.QtSvg import QSvgGenerator

    source = graph_rect(scene)
    size = QSize(round(source.width()), round(source.height()))
    generator = QSvgGenerator()
    generator.setFileName(str(path))
    generator.setSize(size)
    generator.setViewBox(QRectF(0, 0, size.width(), size.height()))
    generator.setTitle("nodegraph")
    generator.setDescription("a nodegraph model exported from the editor")
    painter = QPainter()
    if not painter.begin(generator):
        raise OSError(f"could not write the image {path}: check the folder exists and "
                      "is writable")
    try:
        _paint(scene, painter, QRectF(0, 0, size.width(), size.height()), source)
    finally:
        painter.end()
    return size


def export(scene, path: str | Path) -> QSize:
    """Write the graph to `path` as PNG or SVG, by its suffix."""
    suffix = Path(path).suffix.lower()
    if suffix == ".svg":
        return export_svg(scene, path)
    if suffix == ".png":
        return export_png(scene, path)
    raise ValueError(f"cannot export an image as '{suffix or path}': name the file .png "
                     "or .svg")
