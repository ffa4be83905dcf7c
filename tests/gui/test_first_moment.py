"""The editor's first moments (benchmarks/editor_startup.py): a click on a card while the
block library loads is served without importing torch on the GUI thread, the first run's
warm-up waits for the first check, and a card selected in the first look survives the real
open (rcnn_shapes, fitted far out, failed to open there behind an error box)."""

from __future__ import annotations

import pytest


@pytest.fixture
def loading_window(qtbot, tmp_path, prompts, xor_file, monkeypatch):
    """A `nodegraph edit` window whose blocks are not in yet (not shown: still loading)."""
    from PySide6.QtCore import QSettings

    from nodegraph.gui.base.application import application
    from nodegraph.gui.shell import main_window

    application()
    # this test process has the library imported already: make the window wait for it anyway
    monkeypatch.setattr(main_window, "default_registry_loaded", lambda: False)
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    w = main_window.MainWindow(str(xor_file), settings=settings, prompts=prompts,
                               recovery_dir=tmp_path / "rec", draw_first=True)
    qtbot.addWidget(w)
    yield w
    w.close()


def test_a_preview_while_the_blocks_load_compiles_nothing(loading_window, monkeypatch):
    from nodegraph.gui.shell import main_window

    w = loading_window
    compiled = []
    monkeypatch.setattr(main_window, "compiler", type("Recorder", (), {
        "compile_graph": staticmethod(lambda *a, **k: compiled.append(a))}))
    assert w.blocks_loading
    w.scene.select_nodes(["act"])
    w.preview_selected()  # what selecting a card does with the Preview on select
    assert compiled == []  # compiling imports torch: the click waited seconds for it
    assert w.preview.node == "act" and "Loading the blocks" in w.preview.shape.text()


def test_the_first_run_is_warmed_after_the_first_check(qtbot, loading_window, monkeypatch):
    w = loading_window
    warmed = []  # at each warm-up: whether the first report was in
    monkeypatch.setattr(w.runner, "warm_up", lambda: warmed.append(w.validator.report))
    w.resize(1400, 900)
    w.show()  # the first paint starts the loading
    qtbot.waitUntil(lambda: not w.blocks_loading, timeout=60_000)
    qtbot.waitUntil(lambda: bool(warmed), timeout=60_000)
    assert len(warmed) == 1 and warmed[0] is not None and warmed[0].ok
    assert all(item.label for item in w.scene.wires.values())  # labelled by that check
    qtbot.wait(50)
    assert len(warmed) == 1  # once, not at every report
    w.validator.validate_now()
    assert len(warmed) == 1


def test_a_card_selected_far_out_survives_a_reopen(xor_window, xor_file, prompts):
    w = xor_window
    w.view.set_zoom(0.15)  # far out, as a big graph's first look is fitted
    assert w.scene.far_wires.active
    w.scene.select_nodes(["act"])
    assert w.file_actions.open(str(xor_file))  # the real open after the first look
    assert prompts.kinds() == []  # no "internal error" box (FarLayer already deleted)
    assert set(w.scene.nodes) == set(w.doc.graph.nodes) and not w.scene.selectedItems()


def test_a_graph_checked_before_shows_its_labels_at_the_first_look(qtbot, tmp_path,
                                                                    xor_window, xor_file,
                                                                    prompts, monkeypatch):
    """Labels waited for the block library (torch) and the first check: seconds after the
    cards. A window's clean check remembers them by the graph's content; the next window
    on the same file shows them before its library is in, and an edited file does not."""
    from PySide6.QtCore import QSettings

    from nodegraph.gui.shell import main_window

    w = xor_window  # recovery folder tmp_path / "recovery": the memo in tmp_path / "shapes"
    qtbot.waitUntil(lambda: w.validator.report is not None, timeout=60_000)
    expected = {e.source: item.label for e, item in w.scene.wires.items()}
    assert all(expected.values()) and "scalar" in expected.values()
    assert list((tmp_path / "shapes").glob("*.json"))

    monkeypatch.setattr(main_window, "default_registry_loaded", lambda: False)
    settings = QSettings(str(tmp_path / "s2.ini"), QSettings.Format.IniFormat)

    def first_look():
        second = main_window.MainWindow(str(xor_file), settings=settings, prompts=prompts,
                                        recovery_dir=tmp_path / "recovery", draw_first=True)
        qtbot.addWidget(second)
        assert second.blocks_loading and second.validator.report is None
        return second

    second = first_look()
    assert {e.source: item.label for e, item in second.scene.wires.items()} == expected
    second.close()

    xor_file.write_text(xor_file.read_text().replace('"out_features": 4', '"out_features": 5'))
    third = first_look()  # another content: nothing remembered for it
    assert not any(item.label for item in third.scene.wires.values())
    third.close()
