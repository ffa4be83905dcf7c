"""Data in object storage (issue #37 item 6): tables and WebDataset shards read from a real
S3 API server (moto's, started by the test on 127.0.0.1 with a port picked at run time)
train as the same files on disk do, stay inside the prefix the user allowed, and a
server that stops mid-epoch gives an error naming the object, not a hang."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path

import moto.server as moto_server  # the dev extra; `make setup` (and so .ci/run) installs it
import numpy as np
import pytest
import s3fs  # noqa: F401 - the `remote` extra, installed by `make setup`
import torch

from nodegraph.cli.main import main
from nodegraph.kinds import confine, remote
from nodegraph.kinds.dataset import files_relative_to
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import default_registry

BUCKET = "data-bucket"


@pytest.fixture
def s3(monkeypatch):
    """A running S3 API server, the environment pointing at it with fake credentials; a
    `put(key, bytes)` to fill the bucket and `stop()` to end the server."""
    import fsspec

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    # moto keeps its buckets per process: empty them, whatever an earlier test left
    urllib.request.urlopen(urllib.request.Request(f"http://{host}:{port}/moto-api/reset",
                                                  method="POST"), timeout=30).close()
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1",
                        "AWS_ENDPOINT_URL": f"http://{host}:{port}"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(remote, "CONNECT_TIMEOUT", 2.0)
    monkeypatch.setattr(remote, "READ_TIMEOUT", 5.0)
    monkeypatch.setattr(remote, "RETRIES", 2)
    fsspec.filesystem("s3").clear_instance_cache()  # no client of another test's server
    fs = remote.filesystem("s3://x")
    fs.mkdir(BUCKET)
    stopped = []

    class S3:
        def put(self, key: str, data: bytes) -> None:
            fs.pipe(f"{BUCKET}/{key}", data)

        def upload(self, folder: Path, prefix: str) -> str:
            for f in sorted(folder.rglob("*")):
                if f.is_file():
                    self.put(f"{prefix}/{f.relative_to(folder).as_posix()}", f.read_bytes())
            return f"s3://{BUCKET}/{prefix}"

        def stop(self) -> None:
            if not stopped:
                stopped.append(True)
                server.stop()

    yield S3()
    S3().stop()
    fs.clear_instance_cache()


def _table(folder: Path, n: int = 240) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=n), rng.normal(size=n)
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"a": a, "b": b, "city": rng.choice(["x", "y", "z"], n),
                             "y": (a + b > 0).astype(np.int64)}),
                   folder / "part-0.parquet", row_group_size=50)
    return folder


def _shards(folder: Path) -> Path:
    import webdataset

    rng = np.random.default_rng(1)
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(4):
        with webdataset.TarWriter(str(folder / f"train-{s:03d}.tar")) as sink:
            for i in range(30):
                x = rng.normal(size=(4,)).astype(np.float32)
                sink.write({"__key__": f"{s}_{i:04d}", "npy": x, "cls": int(x.sum() > 0)})
    return folder


def _graph(project: Path, data: dict, classes: int = 2) -> Path:
    doc = {"format": "nodegraph", "version": 1, "name": "remote",
           "nodes": {"data": data,
                     "fc": {"type": "layers.Linear", "params": {"out_features": classes}},
                     "loss": {"type": "losses.CrossEntropy", "params": {}},
                     "opt": {"type": "optimizers.SGD", "params": {"lr": 0.1}}},
           "edges": [{"from": ["data", "x"], "to": ["fc", "input"]},
                     {"from": ["fc", "output"], "to": ["loss", "input"]},
                     {"from": ["data", "y"], "to": ["loss", "target"]},
                     {"from": ["loss", "loss"], "to": ["opt", "loss"]}],
           "training": {"epochs": 2, "seed": 0, "device": "cpu", "workers": 2}}
    path = project / "graph.json"
    path.write_text(json.dumps(doc))
    return path


def _losses(graph: Path, *args: str) -> list[float]:
    out = graph.parent / "metrics.json"
    code = main(["run", str(graph), "--metrics-out", str(out), *args])
    assert code == 0
    history = json.loads(out.read_text())["history"]
    return [h["train"]["loss"] for h in history]


@pytest.mark.slow  # four CLI runs with workers: 40-60 s on 2 shared cores
@pytest.mark.parametrize("kind", ["parquet", "shards"])
def test_training_from_s3_equals_training_from_disk(s3, tmp_path, kind):
    local = tmp_path / "local" / "data"
    if kind == "parquet":
        _table(local)
        params = {"targets": ["y"], "target_kind": "class", "storage": "stream",
                  "batch_size": 16, "val_fraction": 0.25}
        key = "path"
    else:
        _shards(local)
        params = {"val_shards": "", "storage": "stream", "batch_size": 16,
                  "val_fraction": 0.25}
        key = "shards"
    url = s3.upload(local, f"team/{kind}")
    block = "data.Parquet" if kind == "parquet" else "data.WebDataset"
    on_disk = _losses(_graph(local.parent, {"type": block, "params": {key: "data", **params}}))
    project = tmp_path / "project"
    project.mkdir()
    graph = _graph(project, {"type": block, "params": {key: url, **params}})
    from_s3 = _losses(graph, "--data-root", f"s3://{BUCKET}/team")
    assert len(from_s3) == 2 and np.isfinite(from_s3).all()
    assert from_s3 == pytest.approx(on_disk, rel=1e-6)


def test_a_brace_range_of_remote_shards_reads_as_the_folder(s3, tmp_path):
    url = s3.upload(_shards(tmp_path / "s"), "shards")
    spec = default_registry().get("data.WebDataset")
    built = []
    for given in (url, f"{url}/train-{{000..003}}.tar", f"{url}/train-*.tar"):
        params, problems = spec.resolve_params({"shards": given})
        assert not problems
        built.append(spec.build(params).tensors("train")["x"])
    assert len(built[0]) == 120
    assert all(torch.equal(built[0], b) for b in built[1:])
    params, _ = spec.resolve_params({"shards": f"{url}/train-{{000..004}}.tar"})
    with pytest.raises(NodegraphError, match="train-004.tar.*does not exist"):
        spec.build(params)


def _said(capsys) -> str:
    out = capsys.readouterr()
    return out.out + out.err


def test_a_graph_reads_only_the_prefixes_the_user_allowed(s3, tmp_path, capsys):
    s3.upload(_table(tmp_path / "t"), "team/table")
    s3.put("secret/keys.parquet", b"not for the graph")
    project = tmp_path / "project"
    project.mkdir()
    data = {"type": "data.Parquet", "params": {"path": f"s3://{BUCKET}/team/table",
                                                "targets": ["y"], "target_kind": "class"}}
    graph = _graph(project, data)
    assert main(["validate", str(graph)]) != 0  # nothing allowed: refused
    assert "--data-root s3://data-bucket/" in _said(capsys)
    assert main(["validate", str(graph), "--data-root", f"s3://{BUCKET}/team"]) == 0
    capsys.readouterr()
    data["params"]["path"] = f"s3://{BUCKET}/team/../secret/keys.parquet"
    graph = _graph(project, data)
    assert main(["validate", str(graph), "--data-root", f"s3://{BUCKET}/team"]) != 0
    assert "'..'" in _said(capsys)
    data["params"]["path"] = f"s3://{BUCKET}/team-other/x.parquet"  # a sibling prefix
    graph = _graph(project, data)
    assert main(["validate", str(graph), "--data-root", f"s3://{BUCKET}/team"]) != 0
    assert "no one allowed" in _said(capsys)


def test_credentials_never_come_from_the_graph():
    with pytest.raises(NodegraphError, match="credentials"):
        remote.normal("s3://AKIA:secret@bucket/key")


def test_a_listing_stays_under_its_prefix(s3):
    s3.put("a/b/one.tar", b"x")
    s3.put("a/bc/two.tar", b"x")  # shares the prefix's first letters, not its folder
    s3.put("a/b/.hidden.tar", b"x")
    found = remote.listing(f"s3://{BUCKET}/a/b", "shard", recursive=True)
    assert found == [f"s3://{BUCKET}/a/b/one.tar"]


def test_a_listing_refuses_a_key_with_dot_dot(s3):
    s3.put("a/b/../../escape.tar", b"x")  # S3 keys are plain names: this one is legal there
    with pytest.raises(NodegraphError, match=r"'\.\.' part"):
        remote.listing(f"s3://{BUCKET}/a/b", "shard", recursive=True)


def test_an_object_over_the_limit_is_refused_before_reading(s3):
    s3.put("big.bin", b"x" * 5000)
    with pytest.raises(NodegraphError, match="larger than 4,096 bytes"):
        remote.read_bytes(f"s3://{BUCKET}/big.bin", "file", 4096)


def test_a_server_that_stops_mid_epoch_gives_an_error_not_a_hang(s3, tmp_path):
    url = s3.upload(_shards(tmp_path / "s"), "shards")
    spec = default_registry().get("data.WebDataset")
    params, _ = spec.resolve_params({"shards": url, "storage": "stream", "batch_size": 10})
    lazy = spec.build(params)
    from nodegraph.kinds.loading import LoaderOptions

    lazy.configure(LoaderOptions(workers=0))
    caught: list[BaseException] = []

    def epoch() -> None:
        try:
            for k, _ in enumerate(lazy.batches("train", shuffle=False)):
                if k == 1:
                    s3.stop()  # the first shard's bytes are read; the next shard's are not
        except BaseException as e:  # noqa: BLE001 - the test looks at what came
            caught.append(e)

    worker = threading.Thread(target=epoch, daemon=True)
    worker.start()
    worker.join(240)  # a hang fails here, not the whole suite's timeout
    assert not worker.is_alive(), "still reading from a stopped server"
    assert caught and isinstance(caught[0], NodegraphError), caught
    assert f"s3://{BUCKET}/shards/train-00" in str(caught[0])


def test_a_remote_root_is_kept_as_a_url():
    with files_relative_to(Path.cwd()), confine.allowing(["s3://b/p/", Path.cwd()]):
        assert remote.allowed_now() == ("s3://b/p",)
        assert remote.check_allowed("s3://b/p/x.tar") == "s3://b/p/x.tar"
        with pytest.raises(confine.OutsideDataRoot):
            remote.check_allowed("s3://b/px.tar")


def test_a_url_never_echoes_its_credentials_and_refuses_control_characters():
    from nodegraph.kinds import urls

    with pytest.raises(NodegraphError) as e:
        urls.normal("s3://user:secret@bucket/x")
    assert "secret" not in str(e.value) and "bucket" in str(e.value)
    for bad in ("s3://b/a\x1b[31m", "s3://b/a\x00", "s3://b/a\x7f"):
        with pytest.raises(NodegraphError, match="control character"):
            urls.normal(bad)


def _saved(folder: Path, dict_of_splits: bool) -> Path:
    """A Hugging Face dataset written by `save_to_disk`: 4-number rows and a ClassLabel."""
    import datasets

    rng = np.random.default_rng(2)
    x = rng.normal(size=(60, 4)).astype(np.float32)
    features = datasets.Features({"x": datasets.Sequence(datasets.Value("float32"), length=4),
                                  "label": datasets.ClassLabel(names=["no", "yes"])})
    ds = datasets.Dataset.from_dict({"x": x, "label": (x.sum(1) > 0).astype(int)}, features)
    if dict_of_splits:
        ds = datasets.DatasetDict({"train": ds.select(range(45)),
                                   "validation": ds.select(range(45, 60))})
    ds.save_to_disk(str(folder))
    return folder


@pytest.mark.parametrize("dict_of_splits", [False, True])
@pytest.mark.parametrize("storage", ["memory", "stream"])
def test_a_saved_hf_dataset_reads_from_s3_as_from_disk(s3, tmp_path, dict_of_splits, storage):
    local = _saved(tmp_path / "saved", dict_of_splits)
    url = s3.upload(local, "hf")
    spec = default_registry().get("data.HFDataset")
    built = []
    for path in (str(local), url):
        params, problems = spec.resolve_params({"path": path, "inputs": ["x"], "storage": storage,
                                                "val_fraction": 0.25, "batch_size": 8})
        assert not problems
        ds = spec.build(params)
        from nodegraph.kinds.loading import LoaderOptions

        if storage == "stream":
            ds.configure(LoaderOptions(workers=0))
        built.append([b for split in ("train", "val") for b in ds.batches(split, shuffle=False)])
    assert len(built[1]) == len(built[0]) == 6 + 2  # 45 train, 15 val, batches of 8
    for a, b in zip(*built, strict=True):
        assert torch.equal(a["x"], b["x"]) and torch.equal(a["y"], b["y"])


def test_a_saved_hf_dataset_in_s3_reads_only_its_own_files(s3, tmp_path):
    local = _saved(tmp_path / "saved", False)
    state = json.loads((local / "state.json").read_text())
    state["_data_files"][0]["filename"] = "../secret/data.arrow"
    (local / "state.json").write_text(json.dumps(state))
    url = s3.upload(local, "team/hf")
    spec = default_registry().get("data.HFDataset")
    params, _ = spec.resolve_params({"path": url, "inputs": ["x"]})
    with pytest.raises(NodegraphError, match="not a file name inside the folder"):
        spec.build(params)
    params, _ = spec.resolve_params({"path": f"s3://{BUCKET}/team/none", "inputs": ["x"]})
    with pytest.raises(NodegraphError, match="team/none"):
        spec.build(params)
