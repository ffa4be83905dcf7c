"""Preprocessing travels with the model (issue #32, item 3).

A trained model must answer right on a raw input — a photo file, a decoded photo, table
rows as the file holds them — in every way out: `Model.predict`, `nodegraph.forward` and
`nodegraph forward --inputs`, the Python export, the ONNX file (preprocessing inside,
its input contract in the metadata) and a saved `.ngz`. The photos are crops of the two
photographs scikit-learn ships (china.jpg, flower.jpg): nobody in this project made them.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import nodegraph
from nodegraph.model.errors import NodegraphError

ROOT = Path(__file__).resolve().parents[1]
NORMALIZE = ([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])  # the example's augment.Normalize


def write_crops(folder: Path, per_class: int, seed: int = 0) -> Path:
    """`per_class` random crops of mixed sizes and aspects of each sample photograph,
    JPEG-encoded, one subfolder per photograph (china, flower)."""
    from PIL import Image

    sklearn_datasets = pytest.importorskip("sklearn.datasets")
    rng = np.random.default_rng(seed)
    photos = sklearn_datasets.load_sample_images()
    for name, image in zip(("china", "flower"), photos.images, strict=True):
        (folder / name).mkdir(parents=True)
        h, w = image.shape[:2]
        for i in range(per_class):
            ch, cw = int(rng.integers(48, 200)), int(rng.integers(48, 200))
            y, x = int(rng.integers(0, h - ch)), int(rng.integers(0, w - cw))
            Image.fromarray(image[y:y + ch, x:x + cw]).save(folder / name / f"{i:03d}.jpg",
                                                            quality=90)
    return folder


def photo_graph(folder: Path, epochs: int) -> nodegraph.Graph:
    """examples/jpeg_folder.json beside the crops, for their two classes."""
    shutil.copy(ROOT / "examples" / "jpeg_folder.json", folder / "jpeg_folder.json")
    g = nodegraph.load(str(folder / "jpeg_folder.json"))
    g.set_param("data", "path", "photos")
    g.set_param("out", "out_features", 2)
    g.set_training("workers", 0)
    g.set_training("epochs", epochs)
    return g


def decoded(path: Path, size: int = 32) -> np.ndarray:
    """A photo decoded and letter-boxed to size x size as the README's ONNX contract says
    (the example's resize = pad), with Pillow alone: uint8 (H, W, 3)."""
    from PIL import Image

    with Image.open(path) as img:
        img = img.convert("RGB")
    w, h = img.size
    scale = size / max(w, h)
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    img = img.resize((nw, nh), Image.BILINEAR)
    canvas = Image.new("RGB", (size, size))
    canvas.paste(img, ((size - nw) // 2, (size - nh) // 2))
    return np.asarray(canvas)


def onnx_session(path: Path):
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def metadata(path: Path) -> dict[str, str]:
    onnx = pytest.importorskip("onnx")
    return {p.key: p.value for p in onnx.load(str(path)).metadata_props}


def exported_class(path: Path):
    """The model class of a Python export, built, with the weights saved beside it."""
    from safetensors.torch import load_file

    spec = importlib.util.spec_from_file_location(f"exported_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cls = next(v for v in vars(module).values() if isinstance(v, type)
               and issubclass(v, torch.nn.Module) and hasattr(v, "losses"))
    model = cls()
    model.load_state_dict(load_file(str(path.with_name(path.stem + ".weights.safetensors"))))
    return model.eval()


# -- photos ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("photos")
    write_crops(folder / "photos", per_class=8)
    model = nodegraph.fit(photo_graph(folder, epochs=1), progress=False)
    files = sorted((folder / "photos").glob("*/*.jpg"))
    return folder, model, files


def test_forward_on_raw_photos_applies_the_augment_chains_normalize(photos):
    folder, m, files = photos
    images = torch.from_numpy(np.stack([decoded(f) for f in files[:6]]))
    as_read = images.permute(0, 3, 1, 2).float() / 255  # as data.ImageFolder decodes
    mean, std = (torch.tensor(v).view(1, 3, 1, 1) for v in NORMALIZE)
    by_hand = nodegraph.forward(m.graph, {"data.x": (as_read - mean) / std},
                                compiled=m.compiled, raw=False)["out", "output"]
    for raw in (as_read, images):  # float in [0, 1], or the decoded uint8 photos
        got = nodegraph.forward(m.graph, {"data.x": raw}, compiled=m.compiled)
        assert torch.allclose(got["out", "output"], by_hand, atol=1e-5)
    # the bare network on unnormalised images answers otherwise (the bug)
    bare = nodegraph.forward(m.graph, {"data.x": as_read}, compiled=m.compiled, raw=False)
    assert not torch.allclose(bare["out", "output"], by_hand, atol=1e-3)


def test_predict_takes_files_decoded_photos_and_arrays_alike(photos):
    folder, m, files = photos
    from_files = m.predict([str(f) for f in files])
    assert torch.allclose(m.predict(str(files[3])), from_files[3:4], atol=1e-6)
    from PIL import Image

    full = [np.asarray(Image.open(f).convert("RGB")) for f in files]  # any size
    assert torch.allclose(m.predict(full), from_files, atol=1e-6)
    assert torch.allclose(m.predict(full[2]), from_files[2:3], atol=1e-6)
    at_size = np.stack([decoded(f) for f in files])  # (N, 32, 32, 3) uint8
    assert torch.allclose(m.predict(at_size), from_files, atol=1e-5)
    floats = at_size.transpose(0, 3, 1, 2).astype(np.float32) / np.float32(255)
    assert torch.allclose(m.predict(floats), from_files, atol=1e-5)
    # the validation split's classes from its files are the split's own
    val = m.compiled.datasets["data"].sources["val"]
    assert torch.equal(m.predict([str(f) for f in val.files]).argmax(1),
                       m.predict("val").argmax(1))


def test_a_photo_of_the_wrong_form_is_named(photos):
    _, m, files = photos
    with pytest.raises(NodegraphError, match=r"data\.x.*uint8"):
        m.predict(np.zeros((5, 5, 2), np.uint8))
    with pytest.raises(NodegraphError, match=r"data\.x.*does not exist"):
        m.predict(str(files[0]) + ".missing")
    with pytest.raises(NodegraphError, match=r"data\.x.*\(N, 3, 32, 32\)"):
        nodegraph.forward(m.graph, {"data.x": torch.rand(2, 3, 20, 20)}, compiled=m.compiled)


def test_onnx_takes_decoded_photos_and_says_so(photos, tmp_path):
    folder, m, files = photos
    result = m.export("onnx", tmp_path / "m.onnx")
    batch = np.stack([decoded(f) for f in files])
    got = onnx_session(tmp_path / "m.onnx").run(None, {"x": batch})[0]
    want = m.predict([str(f) for f in files]).numpy()
    assert np.abs(got - want).max() < 1e-5
    meta = metadata(tmp_path / "m.onnx")
    assert meta["input.x.dtype"] == "uint8"
    assert meta["input.x.layout"] == "N x H x W x C = N x 32 x 32 x 3"
    assert meta["input.x.channels"] == "RGB" and meta["classes"] == "china, flower"
    assert "Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])" in meta["input.x.preprocessing"]
    assert "longer side to 32" in meta["input.x.resize"]
    assert result.contract["x"]["dtype"] == "uint8"
    # --no-preprocess: the bare network, on the port's own values
    m.export("onnx", tmp_path / "bare.onnx", preprocess=False)
    mean, std = (np.array(v, np.float32).reshape(1, 3, 1, 1) for v in NORMALIZE)
    ready = (batch.transpose(0, 3, 1, 2).astype(np.float32) / np.float32(255) - mean) / std
    bare = onnx_session(tmp_path / "bare.onnx").run(None, {"x": ready.astype(np.float32)})[0]
    assert np.abs(bare - want).max() < 1e-4
    assert metadata(tmp_path / "bare.onnx")["input.x.dtype"] == "float32"


def test_the_python_export_preprocesses_raw_photos(photos, tmp_path):
    folder, m, files = photos
    m.export("python", tmp_path / "photo_model.py")
    model = exported_class(tmp_path / "photo_model.py")
    batch = torch.from_numpy(np.stack([decoded(f) for f in files]))
    want = m.predict([str(f) for f in files])
    with torch.no_grad():
        assert torch.allclose(model(batch), want, atol=1e-5)
        floats = batch.permute(0, 3, 1, 2).float() / 255
        assert torch.allclose(model(floats), want, atol=1e-5)
        ready = model.preprocess(floats)
        assert torch.allclose(model(ready, raw=False), want, atol=1e-5)


def test_a_saved_model_predicts_the_same_on_a_photo(photos, tmp_path):
    folder, m, files = photos
    m.save(folder / "photos.ngz")  # (its data paths are read beside it)
    again = nodegraph.load_model(folder / "photos.ngz")
    assert torch.allclose(again.predict(str(files[5])), m.predict(str(files[5])), atol=1e-6)


def test_forward_on_the_command_line_takes_raw_photos(photos, tmp_path):
    from nodegraph.cli.main import main

    folder, m, files = photos
    weights = tmp_path / "w.safetensors"
    m.export("weights", weights)
    images = np.stack([decoded(f) for f in files[:4]])
    np.savez(tmp_path / "in.npz", **{"data.x": images})
    graph = folder / "jpeg_folder.json"
    doc = json.loads(graph.read_text())
    doc["nodes"]["data"]["params"]["path"] = "photos"
    doc["nodes"]["out"]["params"]["out_features"] = 2
    (folder / "two.json").write_text(json.dumps(doc))
    assert main(["forward", str(folder / "two.json"), "--weights", str(weights), "--inputs",
                 str(tmp_path / "in.npz"), "-o", str(tmp_path / "out.npz"),
                 "--node", "out"]) == 0
    with np.load(tmp_path / "out.npz") as out:
        got = out["out.output"]
    assert np.abs(got - m.predict(images).numpy()).max() < 1e-5


# -- a table -------------------------------------------------------------------------------


def table_graph(folder: Path) -> Path:
    """A zscore-normalised CSV of three columns far from 0, two classes, an MLP."""
    rng = np.random.default_rng(0)
    x = rng.normal([100.0, -300.0, 5.0], [20.0, 5.0, 1.0], size=(200, 3))
    label = ((x[:, 0] - 100) / 20 + (x[:, 1] + 300) / 5 > 0).astype(int)
    rows = ["a,b,c,label", *(f"{a:.4f},{b:.4f},{c:.4f},{k}" for (a, b, c), k
                             in zip(x, label, strict=True))]
    (folder / "t.csv").write_text("\n".join(rows) + "\n")
    doc = {"format": "nodegraph", "version": 1, "name": "table-mlp",
           "nodes": {"data": {"type": "data.CSV", "params": {
                         "path": "t.csv", "normalize": "zscore", "val_fraction": 0.2,
                         "target_kind": "class"}},
                     "h": {"type": "layers.Linear", "params": {"out_features": 16}},
                     "r": {"type": "activations.ReLU", "params": {}},
                     "out": {"type": "layers.Linear", "params": {"out_features": 2}},
                     "loss": {"type": "losses.CrossEntropy", "params": {}},
                     "opt": {"type": "optimizers.Adam", "params": {"lr": 0.01}}},
           "edges": [{"from": ["data", "x"], "to": ["h", "input"]},
                     {"from": ["h", "output"], "to": ["r", "input"]},
                     {"from": ["r", "output"], "to": ["out", "input"]},
                     {"from": ["out", "output"], "to": ["loss", "input"]},
                     {"from": ["data", "y"], "to": ["loss", "target"]},
                     {"from": ["loss", "loss"], "to": ["opt", "loss"]}],
           "training": {"epochs": 5, "seed": 0}}
    (folder / "table.json").write_text(json.dumps(doc))
    return folder / "table.json"


def test_a_table_model_predicts_alike_on_raw_rows_in_every_way_out(tmp_path):
    m = nodegraph.fit(nodegraph.load(str(table_graph(tmp_path))), progress=False)
    raw = np.loadtxt(tmp_path / "t.csv", delimiter=",", skiprows=1)[:, :3].astype(np.float32)
    want = m.predict(raw).numpy()
    m.export("onnx", tmp_path / "t.onnx")
    got = onnx_session(tmp_path / "t.onnx").run(None, {"x": raw})[0]
    assert np.abs(got - want).max() <= 1e-5
    meta = metadata(tmp_path / "t.onnx")
    assert meta["input.x.dtype"] == "float32" and meta["input.x.layout"] == "N x 3"
    assert "raw values" in meta["input.x.range"]
    m.export("onnx", tmp_path / "bare.onnx", preprocess=False)  # the old file: far off
    bare = onnx_session(tmp_path / "bare.onnx").run(None, {"x": raw})[0]
    assert np.abs(bare - want).max() > 1.0
    m.export("python", tmp_path / "table_model.py")
    with torch.no_grad():
        python = exported_class(tmp_path / "table_model.py")(torch.from_numpy(raw))
    assert np.abs(python.numpy() - want).max() <= 1e-5


# -- the whole check, slow ---------------------------------------------------------------


@pytest.mark.slow
def test_every_way_out_gives_each_photo_the_same_class_as_validation(tmp_path):
    """examples/jpeg_folder.json trained on 2 x 40 crops of photographs nobody here made:
    the class of every photo from `m.predict(file)`, the Python export and onnxruntime on
    the decoded photo agree, and on the validation photos their accuracy is the run's."""
    write_crops(tmp_path / "photos", per_class=40, seed=1)
    m = nodegraph.fit(photo_graph(tmp_path, epochs=4), progress=False)
    files = sorted((tmp_path / "photos").glob("*/*.jpg"))
    labels = np.array([0 if f.parent.name == "china" else 1 for f in files])
    predicted = m.predict([str(f) for f in files]).argmax(1).numpy()
    m.export("onnx", tmp_path / "m.onnx")
    batch = np.stack([decoded(f) for f in files])
    onnx = onnx_session(tmp_path / "m.onnx").run(None, {"x": batch})[0].argmax(1)
    m.export("python", tmp_path / "exported.py")
    with torch.no_grad():
        python = exported_class(tmp_path / "exported.py")(torch.from_numpy(batch))
    assert (onnx != predicted).sum() == 0
    assert (python.argmax(1).numpy() != predicted).sum() == 0
    val = m.compiled.datasets["data"].sources["val"]
    index = {f: i for i, f in enumerate(files)}
    rows = [index[Path(f)] for f in val.files]
    accuracy = float((predicted[rows] == labels[rows]).mean())
    assert accuracy == pytest.approx(m.history[-1]["val"]["accuracy"], abs=1e-6)
    assert accuracy > 0.6  # it learned something: the check is not between constants


def test_a_resizing_chain_and_flat_layout_travel_too_where_they_can(photos, tmp_path):
    """RandomResizedCrop's val/test part (Resize + CenterCrop) and a flat layout: predict,
    the Python export and ONNX apply them (torch's exporter has no antialiased resize and
    onnxruntime's differs by 0.15: the file holds it as the linear map it is)."""
    folder, _, files = photos
    doc = {"format": "nodegraph", "version": 1, "name": "flat",
           "nodes": {"data": {"type": "data.ImageFolder", "params": {
                         "path": "photos", "size": 32, "resize": "crop", "layout": "flat",
                         "batch_size": 16, "val_fraction": 0.2}},
                     "rrc": {"type": "augment.RandomResizedCrop", "params": {"size": 24}},
                     "norm": {"type": "augment.Normalize", "params": {}},
                     "out": {"type": "layers.Linear", "params": {"out_features": 2}},
                     "loss": {"type": "losses.CrossEntropy", "params": {}},
                     "opt": {"type": "optimizers.Adam", "params": {"lr": 0.003}}},
           "edges": [{"from": ["rrc", "transform"], "to": ["norm", "input"]},
                     {"from": ["norm", "transform"], "to": ["data", "augment"]},
                     {"from": ["data", "x"], "to": ["out", "input"]},
                     {"from": ["out", "output"], "to": ["loss", "input"]},
                     {"from": ["data", "y"], "to": ["loss", "target"]},
                     {"from": ["loss", "loss"], "to": ["opt", "loss"]}],
           "training": {"epochs": 1, "seed": 0, "workers": 0}}
    (folder / "flat.json").write_text(json.dumps(doc))
    m = nodegraph.fit(nodegraph.load(str(folder / "flat.json")), progress=False)
    want = m.predict([str(f) for f in files])
    from PIL import Image

    cropped = []  # resize = crop: the shorter side to 32, the centre 32 x 32
    for f in files:
        img = Image.open(f).convert("RGB")
        w, h = img.size
        nw, nh = max(1, round(w * 32 / min(w, h))), max(1, round(h * 32 / min(w, h)))
        img = img.resize((nw, nh), Image.BILINEAR)
        left, top = (nw - 32) // 2, (nh - 32) // 2
        cropped.append(np.asarray(img.crop((left, top, left + 32, top + 32))))
    batch = torch.from_numpy(np.stack(cropped))
    assert torch.allclose(m.predict(batch), want, atol=1e-5)
    m.export("python", tmp_path / "flat_model.py")
    with torch.no_grad():
        assert torch.allclose(exported_class(tmp_path / "flat_model.py")(batch), want,
                              atol=1e-5)
    m.export("onnx", tmp_path / "flat.onnx")
    got = onnx_session(tmp_path / "flat.onnx").run(None, {"x": batch.numpy()})[0]
    assert np.abs(got - want.numpy()).max() < 1e-5
    assert "v2.Resize(24" in metadata(tmp_path / "flat.onnx")["input.x.preprocessing"]
    m.export("onnx", tmp_path / "bare.onnx", preprocess=False)
    assert metadata(tmp_path / "bare.onnx")["input.x.layout"] == "N x 1728"


class _Odd:
    """A deterministic step ONNX cannot trace (Python's round of a traced size) and that is
    no linear map either."""

    def __call__(self, x):
        return x * x * round(x.shape[-1] / 3)


def test_a_step_onnx_cannot_hold_is_refused_by_name():
    from nodegraph.interop.export.model import ExportError
    from nodegraph.interop.export.onnx import _traceable
    from nodegraph.kinds.rawinput import ImageInput
    from nodegraph.runtime.preprocess import Preprocess

    image = ImageInput(3, 8, 8, 8, "stretch", read=lambda p: None, steps=(_Odd(),),
                       script=("odd_step()",))
    raw = torch.zeros(2, 8, 8, 3, dtype=torch.uint8)
    with pytest.raises(ExportError, match=r"data: .*odd_step\(\).*no faithful ONNX form.*"
                       r"no-preprocess"):
        _traceable(Preprocess(("data", "x"), image, None), raw, 17)
