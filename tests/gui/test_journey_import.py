"""The import journey (issue #32): a torchvision model imported with `nodegraph import`,
its head replaced in the editor by real events (delete the old head and the example input,
drop a data block, a new head, a loss, an optimizer and a metric from the palette, wire
them by dragging), fine-tuned on a folder of photos, saved as a model and exported to
ONNX, which answers as the model does on the raw photos."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt

import nodegraph
from tests.gui.driver import click_node, drag_wire, drop_block
from tests.gui.test_journey_photos import raw_input, type_into, write_photos

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # an import of ResNet-18, a fine-tuning epoch, ONNX


def test_import_replace_the_head_by_hand_fine_tune_and_export(make_window, qtbot, prompts,
                                                               tmp_path):
    if importlib.util.find_spec("torchvision") is None:
        pytest.skip("torchvision is not installed: pip install -e '.[models]'")
    ort = pytest.importorskip("onnxruntime")
    folder = tmp_path / "r18"
    proc = subprocess.run([sys.executable, "-m", "nodegraph", "import",
                           "torchvision.models:resnet18", "-o", str(folder / "graph.json"),
                           "--input-shape", "2,3,32,32"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    photos = write_photos(folder / "photos", per_class=8)

    w = make_window(str(folder / "graph.json"))
    qtbot.waitUntil(lambda: "fc" in w.scene.nodes, timeout=60_000)
    w.activateWindow()
    w.view.setFocus()
    qtbot.waitUntil(lambda: w.view.hasFocus(), timeout=30_000)
    for old in ("fc", "x"):  # the old head and the example input go
        click_node(w, old)
        assert w.scene.selected_node_ids() == [old]
        qtbot.keyClick(w.view, Qt.Key.Key_Delete)
        assert old not in w.doc.graph.nodes
    right = w.scene.itemsBoundingRect().right() + 200
    w.view.set_zoom(0.5)
    w.view.centerOn(QPointF(right + 300, 200))
    ids = {}
    for i, block in enumerate(("data.ImageFolder", "layers.Linear", "losses.CrossEntropy",
                               "optimizers.Adam", "metrics.Accuracy")):
        ids[block] = drop_block(w, block, QPointF(right + 260 * (i % 3), 260 * (i // 3)))
    data, head = ids["data.ImageFolder"], ids["layers.Linear"]
    loss, opt, accuracy = (ids[b] for b in ("losses.CrossEntropy", "optimizers.Adam",
                                            "metrics.Accuracy"))
    click_node(w, data)
    type_into(w.inspector.fields["path"].editor, "photos")
    type_into(w.inspector.fields["size"].editor, "32")
    assert w.doc.graph.node(data).params["size"] == 32
    click_node(w, head)
    type_into(w.inspector.fields["out_features"].editor, "4")
    assert w.doc.graph.node(head).params["out_features"] == 4
    w.view.fit()
    for source, target in [((data, "x"), ("conv1", "input")),
                           (("flatten", "output"), (head, "input")),
                           ((head, "output"), (loss, "input")), ((data, "y"), (loss, "target")),
                           ((loss, "loss"), (opt, "loss")),
                           ((head, "output"), (accuracy, "input")),
                           ((data, "y"), (accuracy, "target"))]:
        drag_wire(w, source, target)
        assert w.doc.graph.source_of(*target).source == source, (source, target)
    assert w.validator.wait(120)
    assert not [p for p in w.validator.report.problems if p.severity == "error"]

    w.epochs.setValue(2)
    w.actions_by_name["train"].trigger()
    assert w.runner.wait(900)
    result = w.runner.result
    assert result is not None and len(result.history) == 2, w.run_status.text
    prompts.model_to = str(folder / "tuned.ngz")
    w.actions_by_name["save_model"].trigger()

    model = nodegraph.load_model(folder / "tuned.ngz")
    files = sorted(photos.glob("*/*.jpg"))[::3]
    by_predict = [int(model.predict(str(f)).argmax()) for f in files]
    model.export("onnx", folder / "tuned.onnx")
    session = ort.InferenceSession(str(folder / "tuned.onnx"))
    name = session.get_inputs()[0].name
    by_onnx = [int(np.argmax(session.run(None, {name: raw_input(f, 32, "stretch")})[0]))
               for f in files]
    assert by_onnx == by_predict
