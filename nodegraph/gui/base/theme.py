"""The editor's look: a dark and a light theme with readable contrast, in one place.

Colours are named by role (canvas, node body, text, selection, error) so painting code
never holds a hex literal; it reads them from this module when it paints, so switching
theme (`use`) rebinds the role names and repaints, and every card follows. Block
families get a header colour each; port and wire colours
come from the port types in `nodegraph.model.types`. Sizes are in logical pixels and fonts in
points, so the look survives high-DPI screens (Qt scales both).
"""

from __future__ import annotations

import zlib

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPainterPath, QPalette, QPen
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleFactory

from nodegraph.gui.base import _compat  # noqa: F401  (before any Qt call: a PySide6 bug guard)

THEMES = {
    "dark": {
        "CANVAS": "#1b1e23", "GRID": "#262a31", "GRID_MAJOR": "#2f343c",
        "NODE_BODY": "#2a2f37", "NODE_BORDER": "#414854", "TEXT": "#e6e9ee",
        "TEXT_DIM": "#a3acb8", "SELECTION": "#f2c14e", "ERROR": "#ff6b6b",
        "WARNING": "#f0a35e", "OK": "#5cc689", "HOVER": "#7fb8ff", "LABEL_BG": "#14161a",
        "WINDOW": "#23272e", "BASE": "#1b1e23", "ALTERNATE": "#262a31", "BUTTON": "#2e333b",
        "HIGHLIGHT": "#3d6fb4", "HEADER_TEXT": "#f4f6f9", "HEADER_DIM": "#c9d1db",
        "DISABLED": "#6b7380", "CHECK_BORDER": "#6b7482",
    },
    "light": {
        "CANVAS": "#f3f4f6", "GRID": "#e4e7eb", "GRID_MAJOR": "#d3d8de",
        "NODE_BODY": "#ffffff", "NODE_BORDER": "#a9b2bd", "TEXT": "#1c2229",
        "TEXT_DIM": "#55606d", "SELECTION": "#d48a00", "ERROR": "#cf3030",
        "WARNING": "#b9600c", "OK": "#1f7a47", "HOVER": "#2563c4", "LABEL_BG": "#ffffff",
        "WINDOW": "#e9ecef", "BASE": "#ffffff", "ALTERNATE": "#f2f4f6", "BUTTON": "#dde1e6",
        "HIGHLIGHT": "#3d6fb4", "HEADER_TEXT": "#ffffff", "HEADER_DIM": "#e8edf3",
        "DISABLED": "#9aa2ac", "CHECK_BORDER": "#7d8793",
    },
}
CURRENT = "dark"
CANVAS = GRID = GRID_MAJOR = NODE_BODY = NODE_BORDER = TEXT = TEXT_DIM = SELECTION = ""
ERROR = WARNING = OK = HOVER = LABEL_BG = WINDOW = BASE = ALTERNATE = BUTTON = ""
HIGHLIGHT = HEADER_TEXT = HEADER_DIM = DISABLED = CHECK_BORDER = ""
globals().update(THEMES["dark"])

CATEGORY_COLORS = {
    "data": "#3f9e6e", "layers": "#3f7fc0", "activations": "#2f9c98", "losses": "#c5493f",
    "optimizers": "#c9812e", "metrics": "#8e68c2", "schedules": "#a9609f",
}
_SPARE = ("#5f8f3e", "#b0704a", "#4a7fa0", "#9a5a8a", "#6a6fb8", "#3e9a8a")

# plot curves, in the order series appear
PLOT_COLORS = ("#5aa9ff", "#ff9f43", "#5cc689", "#e86a92", "#b48cf2", "#f2d24e")

NODE_WIDTH = 176.0
HEADER_HEIGHT = 40.0
PORT_ROW = 20.0
PORT_RADIUS = 5.5


def diff_color(mark: str) -> str:
    """The colour of a compare mark (File > Compare with…): added, changed or removed."""
    return {"added": OK, "changed": WARNING}.get(mark, ERROR)


def category_color(category: str) -> QColor:
    """The header colour of a block family (a stable spare colour for unknown families)."""
    hex_ = CATEGORY_COLORS.get(category) or _SPARE[zlib.crc32(category.encode()) % len(_SPARE)]
    return QColor(hex_)


def font(point_size: float = 9.0, bold: bool = False, mono: bool = False) -> QFont:
    f = QFont("DejaVu Sans Mono" if mono else "DejaVu Sans")
    f.setPointSizeF(point_size)
    f.setBold(bold)
    if mono:
        f.setStyleHint(QFont.StyleHint.Monospace)
    return f


def stylesheet() -> str:
    """The application style sheet in the current theme's colours."""
    return f"""
QMainWindow::separator {{ background: {NODE_BORDER}; width: 1px; height: 1px; }}
QDockWidget {{ color: {TEXT}; font-weight: bold; }}
QDockWidget::title {{ background: {BUTTON}; padding: 4px 8px; }}
QToolTip {{ color: {TEXT}; background: {LABEL_BG}; border: 1px solid {NODE_BORDER};
            padding: 4px; }}
QLineEdit, QSpinBox, QDoubleSpinBox, QComboBox, QPlainTextEdit, QTreeWidget, QListWidget,
QTableWidget {{ border: 1px solid {NODE_BORDER}; border-radius: 3px; padding: 2px 4px; }}
QLineEdit:focus, QSpinBox:focus, QDoubleSpinBox:focus, QComboBox:focus {{
    border: 1px solid {HOVER}; }}
QLineEdit[invalid="true"], QDoubleSpinBox[invalid="true"], QSpinBox[invalid="true"] {{
    border: 1px solid {ERROR}; }}
QLabel[role="error"] {{ color: {ERROR}; }}
QLabel[role="dim"] {{ color: {TEXT_DIM}; }}
QLabel[role="title"] {{ font-size: 11pt; font-weight: bold; }}
QToolBar {{ spacing: 6px; padding: 3px; border: none; }}
QToolButton {{ padding: 3px 8px; border-radius: 3px; }}
QToolButton:hover {{ background: {BUTTON}; }}
QStatusBar {{ color: {TEXT_DIM}; }}
QProgressBar {{ border: 1px solid {NODE_BORDER}; border-radius: 3px; text-align: center;
                max-height: 14px; }}
QProgressBar::chunk {{ background: {HIGHLIGHT}; }}
QHeaderView::section {{ background: {BUTTON}; color: {TEXT}; border: none; padding: 3px; }}
"""


STYLESHEET = stylesheet()


def palette() -> QPalette:
    """The widget palette in the current theme's colours."""
    p = QPalette()
    roles = {
        QPalette.ColorRole.Window: WINDOW, QPalette.ColorRole.WindowText: TEXT,
        QPalette.ColorRole.Base: BASE, QPalette.ColorRole.AlternateBase: ALTERNATE,
        QPalette.ColorRole.Text: TEXT, QPalette.ColorRole.Button: BUTTON,
        QPalette.ColorRole.ButtonText: TEXT, QPalette.ColorRole.Highlight: HIGHLIGHT,
        QPalette.ColorRole.HighlightedText: "#ffffff", QPalette.ColorRole.ToolTipBase: LABEL_BG,
        QPalette.ColorRole.ToolTipText: TEXT, QPalette.ColorRole.PlaceholderText: TEXT_DIM,
        QPalette.ColorRole.Link: HOVER, QPalette.ColorRole.BrightText: ERROR,
    }
    for role, color in roles.items():
        p.setColor(role, QColor(color))
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text,
                 QPalette.ColorRole.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor(DISABLED))
    return p


dark_palette = palette  # the name older callers use


class EditorStyle(QProxyStyle):
    """Fusion with check boxes that read on a dark background (Fusion's border vanishes)."""

    def drawPrimitive(self, element, option, painter, widget=None) -> None:
        if element != QStyle.PrimitiveElement.PE_IndicatorCheckBox:
            super().drawPrimitive(element, option, painter, widget)
            return
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        r = QRectF(option.rect).adjusted(1.5, 1.5, -1.5, -1.5)
        checked = bool(option.state & QStyle.StateFlag.State_On)
        enabled = bool(option.state & QStyle.StateFlag.State_Enabled)
        painter.setPen(QPen(QColor(HOVER if option.state & QStyle.StateFlag.State_MouseOver
                                   else CHECK_BORDER), 1.2))
        painter.setBrush(QColor(HIGHLIGHT if checked and enabled else BASE))
        painter.drawRoundedRect(r, 3, 3)
        if checked:
            tick = QPainterPath(QPointF(r.left() + r.width() * 0.22, r.center().y()))
            tick.lineTo(QPointF(r.left() + r.width() * 0.42, r.bottom() - r.height() * 0.24))
            tick.lineTo(QPointF(r.right() - r.width() * 0.2, r.top() + r.height() * 0.26))
            painter.setPen(QPen(QColor("#ffffff"), max(1.6, r.width() / 7),
                                Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap,
                                Qt.PenJoinStyle.RoundJoin))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawPath(tick)
        painter.restore()


def apply(app: QApplication, name: str | None = None) -> None:
    """Give the whole application the editor's theme (once, or again when `name` differs
    from the theme in use: re-applying repolishes every widget)."""
    name = name or CURRENT
    if app.property("nodegraph_theme") == name:
        return
    first = not app.property("nodegraph_theme")
    app.setProperty("nodegraph_theme", name)
    use(name)
    if first:
        app.setStyle(EditorStyle(QStyleFactory.create("Fusion")))
        app.setFont(font(9.5))
    app.setPalette(palette())
    app.setStyleSheet(stylesheet())


def use(name: str) -> None:
    """Rebind the colour roles to theme `name` ("dark" or "light"); painting code reads
    them at paint time, so a repaint shows the new theme."""
    global CURRENT, STYLESHEET
    if name not in THEMES:
        raise ValueError(f"unknown theme {name!r}: choose one of {', '.join(THEMES)}")
    globals().update(THEMES[name])
    CURRENT = name
    STYLESHEET = stylesheet()
