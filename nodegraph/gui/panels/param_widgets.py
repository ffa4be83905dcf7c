"""One editing widget per param kind, generated from the param's declaration.

Integers get a spin box and numbers a spin box that reads and writes 1e-8 as such, both
limited to the declared range; choices a combo box, booleans a check box, text a line
edit, lists and JSON a line edit holding JSON; params that name nodes or a stage pick
from the graph's (`NodeEditor`, `NodesEditor`, offered by the caller's `choices`). A param
the user must set shows
"required" until set; a nullable one shows its empty meaning ("auto"). Each widget calls
`commit(value)` when the user finishes an edit and shows values with `show(value)`
without calling back. Checking the value against the declaration is the caller's job.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLineEdit,
    QMenu,
    QSpinBox,
    QToolButton,
    QWidget,
)

from nodegraph.model.spec import Param

Commit = Callable[[Any], None]
Choices = Callable[[], list[str]]  # the node ids (or stage names) a reference may name
INT_LIMIT = 2**31 - 1
UNSET = object()  # the value shown for a required param nobody set

# the mixin below only ever sits before a Qt spin box; the type checker must know that to
# check its super() calls, but at run time it is a plain class (no second Qt base)
if TYPE_CHECKING:
    _SpinBase = QAbstractSpinBox
else:
    _SpinBase = object


class _SpinSession(_SpinBase):
    """Marks the values one spin interaction makes (arrows, wheel, Up/Down, PageUp/Down
    with no typing in between) with one `merge_key`, so undo takes them back as one step;
    a typed value confirmed with Enter has no key and is a step of its own."""

    _STEP_KEYS = (Qt.Key.Key_Up, Qt.Key.Key_Down, Qt.Key.Key_PageUp, Qt.Key.Key_PageDown)
    _sessions = itertools.count(1)

    def _init_session(self) -> None:
        self._stepping = False
        self._session = next(self._sessions)

    @property
    def merge_key(self) -> object:
        return self._session if self._stepping else None

    def stepBy(self, steps: int) -> None:
        self._stepping = True
        try:
            super().stepBy(steps)
        finally:
            self._stepping = False

    def keyPressEvent(self, event) -> None:
        if event.key() not in self._STEP_KEYS:
            self._session = next(self._sessions)  # typing ends the interaction
        super().keyPressEvent(event)

    def focusOutEvent(self, event) -> None:
        self._session = next(self._sessions)
        super().focusOutEvent(event)


class IntEditor(_SpinSession, QSpinBox):
    def __init__(self, param: Param, commit: Commit):
        super().__init__()
        self._init_session()
        self.param, self._commit = param, commit
        low = int(param.min) if param.min is not None else -INT_LIMIT + 1
        high = int(param.max) if param.max is not None else INT_LIMIT
        # one step below the range means "not set" for a required param
        self.setRange(low - 1 if param.required else low, high)
        if param.required:
            self.setSpecialValueText("required")
        self.setKeyboardTracking(False)
        self.valueChanged.connect(self._changed)

    def show_value(self, value: Any) -> None:
        self.blockSignals(True)
        self.setValue(self.minimum() if value is UNSET or value is None else int(value))
        self.blockSignals(False)

    def _changed(self, value: int) -> None:
        self._commit(UNSET if self.param.required and value == self.minimum() else value)


class FloatEditor(_SpinSession, QDoubleSpinBox):
    """A spin box that shows numbers compactly (0.05, 1e-08) instead of fixed decimals."""

    def __init__(self, param: Param, commit: Commit):
        super().__init__()
        self._init_session()
        self.param, self._commit = param, commit
        self.setDecimals(12)
        low = param.min if param.min is not None else -1e12
        high = param.max if param.max is not None else 1e12
        self.setRange(low, high)
        span = (param.max - param.min if param.min is not None and param.max is not None
                else math.inf)
        self.setSingleStep(0.01 if span <= 1 else 0.1)
        self.setKeyboardTracking(False)
        self.valueChanged.connect(lambda v: self._commit(float(v)))

    def textFromValue(self, value: float) -> str:
        return f"{value:.6g}"

    def valueFromText(self, text: str) -> float:
        try:
            return float(text)
        except ValueError:
            return self.value()

    def validate(self, text: str, pos: int):
        stripped = text.strip()
        try:
            value = float(stripped)
        except ValueError:
            ok = stripped in ("", "-", "+", ".") or stripped.lower().endswith(("e", "e-", "e+"))
            return (QValidator.State.Intermediate if ok else QValidator.State.Invalid), text, pos
        inside = self.minimum() <= value <= self.maximum()
        return (QValidator.State.Acceptable if inside else QValidator.State.Intermediate), text, pos

    def show_value(self, value: Any) -> None:
        self.blockSignals(True)
        self.setValue(float(value) if isinstance(value, int | float) else self.minimum())
        self.blockSignals(False)


class NullableNumberEditor(QLineEdit):
    """A number that may be left empty (meaning the param's 'auto' or 'off')."""

    def __init__(self, param: Param, commit: Commit):
        super().__init__()
        self.param, self._commit = param, commit
        self.setPlaceholderText("empty: " + _empty_meaning(param))
        self.editingFinished.connect(self._finished)

    def show_value(self, value: Any) -> None:
        self.setText("" if value is None or value is UNSET else f"{value:g}")

    def _finished(self) -> None:
        text = self.text().strip()
        if not text:
            self._commit(None)
            return
        try:
            value = float(text)
        except ValueError:
            self._commit(text)  # the param check names what was expected
            return
        self._commit(int(value) if self.param.kind == "int" and value.is_integer() else value)


class BoolEditor(QCheckBox):
    def __init__(self, param: Param, commit: Commit):
        super().__init__()
        self.toggled.connect(commit)

    def show_value(self, value: Any) -> None:
        self.blockSignals(True)
        self.setChecked(bool(value) if value is not UNSET else False)
        self.blockSignals(False)


class ChoiceEditor(QComboBox):
    def __init__(self, param: Param, commit: Commit):
        super().__init__()
        self.choices = list(param.choices)
        for c in self.choices:
            self.addItem(str(c))
        self.activated.connect(lambda i: commit(self.choices[i]))

    def show_value(self, value: Any) -> None:
        self.blockSignals(True)
        self.setCurrentIndex(self.choices.index(value) if value in self.choices else -1)
        self.blockSignals(False)


class TextEditor(QLineEdit):
    def __init__(self, param: Param, commit: Commit):
        super().__init__()
        self.editingFinished.connect(lambda: commit(self.text()))
        if param.required:
            self.setPlaceholderText("required")

    def show_value(self, value: Any) -> None:
        self.setText("" if value is UNSET or value is None else str(value))


class JsonEditor(QLineEdit):
    """Lists and JSON values as JSON text; a list of texts may also be typed as a, b, c."""

    def __init__(self, param: Param, commit: Commit):
        super().__init__()
        self.param, self._commit = param, commit
        self.setPlaceholderText("required" if param.required else
                                "empty: " + _empty_meaning(param) if param.nullable else
                                "JSON, e.g. [1, 2]")
        self.editingFinished.connect(self._finished)

    def show_value(self, value: Any) -> None:
        self.setText("" if value is UNSET or value is None else json.dumps(value))

    def _finished(self) -> None:
        text = self.text().strip()
        if self.param.kind in ("strs", "nodes") and not text.startswith("["):
            self._commit([s.strip() for s in text.split(",") if s.strip()])
            return
        try:
            value = json.loads(text) if text else None
        except json.JSONDecodeError as e:
            self._commit(_NotJson(f"'{self.param.name}' is not valid JSON: {e.msg} "
                                  f"at character {e.pos + 1}"))
            return
        self._commit(value)


class NodeEditor(QComboBox):
    """A node id (or stage name) picked from the graph's, or typed; empty means none."""

    def __init__(self, param: Param, commit: Commit, choices: Choices):
        super().__init__()
        self.param, self._commit, self.choices = param, commit, choices
        self._shown = ""
        self.setEditable(True)
        self.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        edit = self.lineEdit()
        assert edit is not None  # an editable combo box always has one
        edit.setPlaceholderText("required" if param.required else "empty: none")
        self.activated.connect(lambda _: self._commit(self.currentText()))
        edit.editingFinished.connect(self._typed)

    def _typed(self) -> None:
        if self.currentText() != self._shown:
            self._commit(self.currentText())

    def show_value(self, value: Any) -> None:
        self.blockSignals(True)
        self.clear()
        self.addItems(([] if self.param.required else [""]) + self.choices())
        self._shown = "" if value is UNSET or value is None else str(value)
        self.setCurrentText(self._shown)
        self.blockSignals(False)


class NodesEditor(QWidget):
    """A list of node ids: typed as a, b, c or ticked in the menu of the graph's nodes."""

    def __init__(self, param: Param, commit: Commit, choices: Choices):
        super().__init__()
        self.param, self._commit, self.choices = param, commit, choices
        self.text = JsonEditor(param, commit)
        self.text.setPlaceholderText("empty: " + _empty_meaning(param) if not param.required
                                     else "required")
        self.menu = QMenu(self)
        self.menu.aboutToShow.connect(self._fill)
        self.pick = QToolButton()
        self.pick.setText("▾")
        self.pick.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.pick.setToolTip(f"pick the nodes of {param.name}")
        self.pick.setMenu(self.menu)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.text, 1)
        row.addWidget(self.pick)
        self.value: list = []

    def _fill(self) -> None:
        self.menu.clear()
        for node in self.choices():
            action = self.menu.addAction(node)
            action.setCheckable(True)
            action.setChecked(node in self.value)
            action.toggled.connect(lambda on, n=node: self.toggle(n, on))

    def toggle(self, node: str, on: bool) -> None:
        value = [n for n in self.value if n != node] + ([node] if on else [])
        self._commit(value)

    def show_value(self, value: Any) -> None:
        self.value = list(value) if isinstance(value, list) else []
        self.text.show_value(value)


class _NotJson(str):
    """Text that failed to parse; the inspector shows it as the reason."""


def is_parse_error(value: Any) -> bool:
    return isinstance(value, _NotJson)


def make_editor(param: Param, commit: Commit, choices: Choices | None = None) -> QWidget:
    """The widget for `param`; it calls `commit(value)` when the user finishes an edit.
    `choices` lists what a node, nodes or stage param may name (default: nothing)."""
    editor: QWidget
    if param.kind in ("node", "stage", "nodes"):
        pick: type[NodesEditor | NodeEditor] = NodesEditor if param.kind == "nodes" else NodeEditor
        editor = pick(param, commit, choices or list)
    elif param.nullable and param.kind in ("int", "float"):
        editor = NullableNumberEditor(param, commit)
    else:
        cls: Callable[[Param, Commit], QWidget] = {
            "int": IntEditor, "float": FloatEditor, "bool": BoolEditor,
            "choice": ChoiceEditor, "str": TextEditor}.get(param.kind, JsonEditor)
        editor = cls(param, commit)
    editor.setToolTip(tooltip(param))
    return editor


def tooltip(param: Param) -> str:
    text = f"<b>{param.name}</b>: {param.doc}" if param.doc else f"<b>{param.name}</b>"
    text += f"<br><i>{param.describe()}</i>"
    if not param.required:
        text += f"<br>default: {json.dumps(param.default)}"
    return text


def _empty_meaning(param: Param) -> str:
    doc = param.doc.lower()
    for word in ("inferred", "infer", "auto", "no clipping", "never", "off"):
        if word in doc:
            return "infer" if word.startswith("infer") else word
    return "none"
