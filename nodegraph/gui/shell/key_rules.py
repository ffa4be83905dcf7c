"""Where a key goes, decided in one place: the keyboard follows the user.

Every shortcut of a window is window-wide (menus._action), so Delete, Copy, Paste and the
single-letter keys work after a click in the palette or any panel. One rule says when a
field gets the key instead:

- a text field (a line edit, a spin box, an editable combo box, an editable text box)
  keeps every key without Ctrl or Alt (letters, Delete, Backspace: T types a T, it never
  folds a panel) and its own clipboard keys;
- Ctrl+Z / Ctrl+Shift+Z / Ctrl+Y go to the field only while it has something of its own
  to undo or redo; otherwise they undo and redo the graph;
- a read-only text (the log) keeps Ctrl+C only while some of it is selected.

Enter or Escape in a field of the inspector or the toolbar (a param, Epochs) commits it
(the field's own focus-out does) and gives the keys back to the canvas; so does starting a
run from a field.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QToolBar,
    QWidget,
)

Key = QKeySequence.StandardKey
UNDO = (Key.Undo,)
REDO = (Key.Redo,)
MODIFIERS = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier | \
    Qt.KeyboardModifier.MetaModifier
K = Qt.Key
EDITING_KEYS = {K.Key_Delete, K.Key_Backspace, K.Key_Home, K.Key_End, K.Key_Left, K.Key_Right,
                K.Key_Up, K.Key_Down, K.Key_PageUp, K.Key_PageDown, K.Key_Insert, K.Key_Space}
DONE_KEYS = (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Escape)


def _is(event: QKeyEvent, keys: tuple) -> bool:
    return any(event.matches(k) for k in keys)


def _is_redo(event: QKeyEvent) -> bool:
    combo = event.keyCombination()
    ctrl = Qt.KeyboardModifier.ControlModifier
    shift = Qt.KeyboardModifier.ShiftModifier
    return _is(event, REDO) or (combo.key(), combo.keyboardModifiers()) in (
        (Qt.Key.Key_Z, ctrl | shift), (Qt.Key.Key_Y, ctrl))


def line_edit_of(widget: QWidget) -> QLineEdit | None:
    """The line edit a text field types into (a spin box's, an editable combo's)."""
    if isinstance(widget, QLineEdit):
        return widget
    if isinstance(widget, QAbstractSpinBox):
        return widget.findChild(QLineEdit)
    if isinstance(widget, QComboBox) and widget.isEditable():
        return widget.lineEdit()
    return None


def is_text_field(widget: QWidget | None) -> bool:
    """Where typed letters belong: a field the user types into."""
    if widget is None:
        return False
    if line_edit_of(widget) is not None:
        return not (isinstance(widget, QLineEdit) and widget.isReadOnly())
    return isinstance(widget, QTextEdit | QPlainTextEdit) and not widget.isReadOnly()


def field_wants(widget: QWidget, event: QKeyEvent) -> bool | None:
    """Whether the focused `widget` takes `event` before the window's shortcuts (True),
    leaves it to them (False), or None: no rule of ours, Qt decides."""
    if is_text_field(widget):
        if _is(event, UNDO) or _is_redo(event):
            edit = line_edit_of(widget)
            if edit is not None:
                return edit.isUndoAvailable() if _is(event, UNDO) else edit.isRedoAvailable()
            if isinstance(widget, QTextEdit | QPlainTextEdit):  # a text box
                doc = widget.document()
                return doc.isUndoAvailable() if _is(event, UNDO) else doc.isRedoAvailable()
            return None
        if not event.modifiers() & MODIFIERS and (event.text().isprintable() and event.text()
                                                  or event.key() in EDITING_KEYS):
            return True  # letters, Delete, Backspace, Home: the field's (F5 still trains)
        return None
    if isinstance(widget, QTextEdit | QPlainTextEdit) and event.matches(Key.Copy):
        return widget.textCursor().hasSelection()  # a read-only text: its selection only
    return None


class KeyRules(QObject):
    """The rule above, for the widgets of one window (an application-wide event filter
    that looks only at key events of its own window)."""

    def __init__(self, window: QWidget):
        super().__init__(window)
        self.window = window
        app = QApplication.instance()
        if app is not None:
            app.installEventFilter(self)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind not in (QEvent.Type.ShortcutOverride, QEvent.Type.KeyPress):
            return False
        if not isinstance(obj, QWidget) or obj.window() is not self.window:
            return False
        assert isinstance(event, QKeyEvent)
        if kind == QEvent.Type.ShortcutOverride:
            wants = field_wants(obj, event)
            if wants is None:
                return False
            event.setAccepted(wants)  # accepted: the field's key; ignored: the shortcut's
            return True
        if event.key() in DONE_KEYS and not event.modifiers() & MODIFIERS and \
                self.gives_back(obj):
            QTimer.singleShot(0, self.to_canvas)  # after the field took the key (Enter)
        return False

    def gives_back(self, widget: QWidget) -> bool:
        """Whether Enter and Escape in `widget` hand the keys back to the canvas: a field of
        the inspector or of the toolbar (a dialog's or Find's keep theirs)."""
        if not is_text_field(widget) and not isinstance(widget, QComboBox):
            return False
        inspector = getattr(self.window, "inspector", None)
        if isinstance(inspector, QWidget) and inspector.isAncestorOf(widget):
            return True
        parent = widget.parentWidget()
        while parent is not None and parent is not self.window:
            if isinstance(parent, QToolBar):
                return True
            parent = parent.parentWidget()
        return False

    def to_canvas(self) -> None:
        """The canvas in front gets the keys (the field loses focus: that commits it)."""
        tabs = getattr(self.window, "group_tabs", None)
        if tabs is not None:
            tabs.focus_canvas()

    def leave_field(self) -> None:
        """A run started (or a command acted) while a toolbar or inspector field had the
        keys: it commits and the canvas gets them, no text left selected."""
        focus = QApplication.focusWidget()
        if focus is not None and focus.window() is self.window and self.gives_back(focus):
            edit = line_edit_of(focus)
            if edit is not None:
                edit.deselect()
            self.to_canvas()


def install(window: QWidget) -> KeyRules:
    rules = KeyRules(window)
    window.key_rules = rules  # type: ignore[attr-defined]
    return rules
