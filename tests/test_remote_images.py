"""An image folder in object storage (issue #37 item 6): `data.ImageFolder` with an
``s3://`` path, read from a real S3 API server (moto's, on 127.0.0.1 with a port picked at
run time, `tests.test_remote_data.s3`), lists only keys under the allowed prefix, reads
each header from the object's first bytes into the folder index (so a later start reads
none), trains with DataLoader workers to the losses of the same folder on disk, and a
server that stops mid-epoch gives an error naming the object, not a hang."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nodegraph.kinds import folder_index, remote
from nodegraph.kinds.loading import LoaderOptions
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import default_registry
from nodes.data import _images
from tests.test_remote_data import BUCKET, _graph, _losses
from tests.test_remote_data import s3 as s3  # noqa: F401 (the fixture)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Each test's folder index in its own cache folder."""
    monkeypatch.setenv("NODEGRAPH_CACHE", str(tmp_path / "cache"))


def _jpeg_turned(a: np.ndarray) -> bytes:
    """A JPEG whose EXIF orientation (6) says: turn it to stand upright."""
    exif = Image.Exif()
    exif[0x0112] = 6
    out = io.BytesIO()
    Image.fromarray(a).save(out, "JPEG", quality=90, exif=exif.tobytes())
    return out.getvalue()


def _photos(folder: Path, per_class: int = 8) -> Path:
    """Three classes of small photos, PNG and JPEG of mixed sizes (one turned by EXIF),
    each class brighter in its own channel so a linear model learns something."""
    rng = np.random.default_rng(0)
    for k, cls in enumerate(("cat", "dog", "owl")):
        (folder / cls).mkdir(parents=True)
        for i in range(per_class):
            h, w = int(rng.integers(10, 17)), int(rng.integers(10, 17))
            a = rng.integers(0, 120, size=(h, w, 3), dtype=np.uint8)
            a[..., k] += 120
            if i == 0 and k == 0:
                (folder / cls / "turned.jpg").write_bytes(_jpeg_turned(a))
            elif i % 2:
                Image.fromarray(a).save(folder / cls / f"{i:02d}.png")
            else:
                Image.fromarray(a).save(folder / cls / f"{i:02d}.jpg", quality=95)
    return folder


def _block(path: str, **params) -> dict:
    return {"type": "data.ImageFolder",
            "params": {"path": path, "size": 8, "resize": "crop", "layout": "flat",
                       "storage": "stream", "batch_size": 6, "val_fraction": 0.25, **params}}


def _batches(path: str, workers: int) -> list[dict[str, torch.Tensor]]:
    spec = default_registry().get("data.ImageFolder")
    params, problems = spec.resolve_params(_block(path)["params"])
    assert not problems
    lazy = spec.build(params)
    lazy.configure(LoaderOptions(workers=workers))
    return [b for split in ("train", "val") for b in lazy.batches(split, shuffle=False)]


def test_the_photos_read_from_s3_are_the_photos_on_disk(s3, tmp_path):
    local = _photos(tmp_path / "photos")
    url = s3.upload(local, "photos")
    on_disk, from_s3 = _batches(str(local), 0), _batches(url, 0)
    assert len(on_disk) == len(from_s3) == 3 + 1  # 18 train, 6 val, batches of 6
    for a, b in zip(on_disk, from_s3, strict=True):
        assert torch.equal(a["x"], b["x"]) and torch.equal(a["y"], b["y"])

    spec = default_registry().get("data.ImageFolder")
    params, _ = spec.resolve_params(_block(url)["params"])
    built = spec.build(params)
    read = built.raw_inputs["x"].read  # predicting on a photo named by URL
    for name in ("cat/turned.jpg", "owl/03.png"):
        assert np.array_equal(read(f"{url}/{name}"), read(local / name))
    with pytest.raises(NodegraphError, match="object storage.*on disk"):
        built.script("data")  # the Python export says it reads folders on disk only


@pytest.mark.slow  # two CLI runs with 2 workers (a fork server beside moto's thread): 30-45 s
def test_training_from_s3_equals_training_from_disk(s3, tmp_path):
    local = _photos(tmp_path / "local" / "photos")
    url = s3.upload(local, "team/photos")
    on_disk = _losses(_graph(local.parent, _block("photos"), classes=3))
    project = tmp_path / "project"
    project.mkdir()
    graph = _graph(project, _block(url), classes=3)  # 2 epochs, 2 DataLoader workers
    from_s3 = _losses(graph, "--data-root", f"s3://{BUCKET}/team")
    assert len(from_s3) == 2 and np.isfinite(from_s3).all()
    assert from_s3 == pytest.approx(on_disk, rel=1e-6)


def _index(url: str) -> tuple[folder_index.Listing, np.ndarray, dict[int, str]]:
    listing = _images.list_images(url)
    read = _images.RemoteHeaders("apply", _images.refused_unread(listing))
    return (listing, *folder_index.index(listing, "image-header exif=apply", read,
                                         say=lambda _: None))


def test_headers_come_from_a_ranged_read_and_are_kept_in_the_index(s3, tmp_path,
                                                                   monkeypatch):
    local = _photos(tmp_path / "photos", per_class=3)
    big = np.random.default_rng(1).integers(0, 255, (200, 300, 3), dtype=np.uint8)
    Image.fromarray(big).save(local / "dog" / "big.png")  # ~180 KB: its header is in the first KB
    url = s3.upload(local, "photos")
    heads, fetched = [], []
    real_heads, real_fetch = remote.heads, remote.fetch
    monkeypatch.setattr(remote, "heads", lambda urls, what, n: heads.extend(
        (u, n) for u in urls) or real_heads(urls, what, n))
    monkeypatch.setattr(remote, "fetch", lambda u, what, n: fetched.append(u) or
                        real_fetch(u, what, n))
    listing, headers, bad = _index(url)
    assert not bad and len(listing.names) == 10
    assert {u for u, _ in heads} == {f"{url}/{n}" for n in listing.names}
    assert {n for _, n in heads} == {_images.HEAD_BYTES} and not fetched  # never whole
    for i, name in enumerate(listing.names):  # as the same file's header on disk
        assert tuple(headers[i]) == _images.header(local / name), name
    turned = list(listing.names).index("cat/turned.jpg")
    h, w = np.asarray(Image.open(local / "cat/turned.jpg")).shape[:2]
    assert tuple(headers[turned]) == (3, w, h)  # upright, as EXIF says

    heads.clear()
    _, again, _ = _index(url)  # a later start: listed, no header read
    assert heads == [] and np.array_equal(again, headers)

    s3.put("photos/dog/big.png", (local / "cat" / "01.png").read_bytes())  # rewritten
    _, changed, _ = _index(url)
    assert [u for u, _ in heads] == [f"{url}/dog/big.png"]  # only the changed one read
    assert tuple(changed[list(listing.names).index("dog/big.png")]) == \
        _images.header(local / "cat" / "01.png")


def test_a_header_past_the_first_bytes_is_read_from_the_whole_object(s3, monkeypatch):
    a = np.random.default_rng(2).integers(0, 255, (40, 30, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(a).save(out, "TIFF")  # Pillow writes the directory after the pixels
    s3.put("t/cls/a.tif", out.getvalue())
    s3.put("t/cls/b.png", out.getvalue()[:10])  # not an image
    monkeypatch.setattr(_images, "HEAD_BYTES", 512)  # the directory lies past 512 bytes
    listing, headers, bad = _index(f"s3://{BUCKET}/t")
    assert tuple(headers[0]) == (3, 40, 30)
    assert list(bad) == [1] and f"s3://{BUCKET}/t/cls/b.png" in bad[1]


def test_refused_objects_are_named_and_keys_stay_under_the_prefix(s3, tmp_path):
    url = s3.upload(_photos(tmp_path / "p", per_class=2), "p")
    s3.put("p/dog/empty.png", b"")
    s3.put("p/dog/text.jpg", b"not a photo")
    s3.put("p-other/cat/x.png", (tmp_path / "p" / "cat" / "01.png").read_bytes())
    spec = default_registry().get("data.ImageFolder")
    params, _ = spec.resolve_params(_block(url, on_error="skip", val_fraction=0.0)["params"])
    ds = spec.build(params)
    assert sorted(r["file"] for r in ds.refused) == [f"{url}/dog/empty.png",
                                                     f"{url}/dog/text.jpg"]
    assert ds.size("train") == 6  # p-other/ is not p/
    params, _ = spec.resolve_params(_block(url)["params"])
    with pytest.raises(NodegraphError, match=f"{url}/dog/empty.png.*on_error = skip"):
        spec.build(params)
    s3.put("p/cat/../../escape.png", b"x")
    with pytest.raises(NodegraphError, match=r"'\.\.' part"):
        spec.build(params)


@pytest.mark.parametrize("workers", [0, pytest.param(2, marks=pytest.mark.slow)])  # 2: ~10 s
def test_a_server_that_stops_mid_epoch_gives_an_error_not_a_hang(s3, tmp_path, workers):
    url = s3.upload(_photos(tmp_path / "p"), "p")
    spec = default_registry().get("data.ImageFolder")
    params, _ = spec.resolve_params(_block(url, batch_size=2, val_fraction=0.0)["params"])
    lazy = spec.build(params)
    lazy.configure(LoaderOptions(workers=workers))
    caught: list[BaseException] = []

    def epoch() -> None:
        try:
            for k, batch in enumerate(lazy.batches("train", shuffle=False)):
                assert torch.isfinite(batch["x"]).all()
                if k == 0:
                    s3.stop()  # the first photos are read; most are not
        except BaseException as e:  # noqa: BLE001 - the test looks at what came
            caught.append(e)

    worker = threading.Thread(target=epoch, daemon=True)
    worker.start()
    worker.join(240)  # a hang fails here, not the whole suite's timeout
    assert not worker.is_alive(), "still reading from a stopped server"
    assert caught and isinstance(caught[0], NodegraphError), caught
    assert f"s3://{BUCKET}/p/" in str(caught[0]) and "object storage" in str(caught[0])
    assert "Traceback" not in str(caught[0])  # a worker's error as its own message
