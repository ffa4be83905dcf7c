"""The file-format data blocks: CIFAR binary, Parquet/Arrow/CSV, Hugging Face datasets on
disk, WebDataset shards, subword-tokenised text, and the streamed builds of MNIST and NumPy.

Each block's meta (read from headers, footers and listings) describes exactly the dataset
it builds; the streamed build (`storage` stream) holds exactly the rows of each split the
in-memory build holds; values are checked against the format's own definition or a
reference reader (the `webdataset` package, pyarrow, numpy); bad files are refused with a
message naming the file, and validation names the block and node.
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import replace

import numpy as np
import pytest
import torch

from nodegraph.check.validate import validate
from nodegraph.kinds.datameta import DataMeta
from nodegraph.kinds.dataset import Dataset
from nodegraph.kinds.streamed import StreamedDataset
from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph
from nodegraph.model.spec import default_registry
from nodes.data.cifar import write_cifar


def _spec(block, **given):
    spec = default_registry().get(block)
    params, problems = spec.resolve_params(given)
    assert not problems, problems
    return spec, params


def _same_as_streamed(block, **given):
    """The meta, the in-memory build and the streamed build agree split by split."""
    spec, memory = _spec(block, **given)
    _, stream = _spec(block, storage="stream", **given)
    meta = spec.meta(memory) if spec.meta is not None else None
    built, lazy = spec.build(memory), spec.build(stream)
    assert isinstance(built, Dataset) and isinstance(lazy, StreamedDataset)
    assert DataMeta.of(lazy) == replace(DataMeta.of(built), streamed=True)
    if meta is not None:
        assert meta == DataMeta.of(built)  # small: auto holds it in memory
        assert _spec(block, storage="stream", **given)[0].meta(stream) == DataMeta.of(lazy)
    for split in ("train", "val", "test"):
        assert built.has(split) == lazy.has(split)
        if built.has(split):
            a, b = built.tensors(split), lazy.tensors(split)
            for port in a:
                assert a[port].dtype == b[port].dtype and a[port].shape == b[port].shape
                assert torch.allclose(a[port].float(), b[port].float(), atol=1e-5), port
    return built, lazy


def _problem(tmp_path, block, **given):
    """The one validation problem of a graph holding only this data block."""
    g = Graph("bad")
    g.add(block, id="mydata", **given)
    problems = validate(g).problems
    assert problems, "the bad file was not refused"
    return problems[0].message


# -- CIFAR ------------------------------------------------------------------------------


@pytest.fixture
def cifar10(tmp_path):
    rng = np.random.default_rng(0)
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    images = rng.integers(0, 256, (90, 3, 32, 32), dtype=np.uint8)
    labels = rng.integers(0, 10, 90)
    for i in range(3):
        write_cifar(folder / f"data_batch_{i + 1}.bin", images[30 * i:30 * i + 30],
                    labels[30 * i:30 * i + 30])
    write_cifar(folder / "test_batch.bin", images[:12], labels[:12])
    return folder, images, labels


def test_cifar_records_decode_as_the_format_defines(cifar10):
    folder, images, labels = cifar10
    raw = (folder / "data_batch_2.bin").read_bytes()
    record = raw[3073 * 4:3073 * 5]  # sample 34: the 5th record of the second file
    assert record[0] == labels[34]
    red = np.frombuffer(record[1:1025], np.uint8).reshape(32, 32)
    spec, p = _spec("data.CIFAR", path=str(folder), val_fraction=0.0)
    data = spec.build(p)
    x = data.tensors("train")["x"][34]
    assert torch.equal(x[0], torch.from_numpy(red.astype(np.float32) / 255))
    assert torch.equal(data.tensors("train")["y"], torch.as_tensor(labels))
    assert data.size("test") == 12


@pytest.mark.parametrize("given", [{}, {"split": "stratified", "normalize": "zscore"},
                                   {"layout": "flat", "use_test": False,
                                    "test_fraction": 0.2}])
def test_cifar_meta_and_streamed_match_the_built_dataset(cifar10, given):
    _same_as_streamed("data.CIFAR", path=str(cifar10[0]), **given)


def test_cifar100_reads_fine_or_coarse_labels(tmp_path):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (20, 3, 32, 32), dtype=np.uint8)
    fine, coarse = rng.integers(0, 100, 20), rng.integers(0, 20, 20)
    write_cifar(tmp_path / "train.bin", images, fine, coarse=coarse)
    for label, want in (("fine", fine), ("coarse", coarse)):
        spec, p = _spec("data.CIFAR", path=str(tmp_path), label=label, val_fraction=0.0)
        assert torch.equal(spec.build(p).tensors("train")["y"], torch.as_tensor(want))


def test_a_cifar_file_of_the_wrong_length_is_named(cifar10, tmp_path):
    folder = cifar10[0]
    with open(folder / "data_batch_2.bin", "ab") as f:
        f.write(b"\0" * 100)
    message = _problem(tmp_path, "data.CIFAR", path=str(folder))
    assert "data_batch_2.bin" in message and "data.CIFAR 'mydata'" in message
    assert "whole number of 3,073-byte records" in message


# -- Parquet / Arrow / CSV --------------------------------------------------------------


def _table(n=300, seed=0):
    rng = np.random.default_rng(seed)
    return {"age": rng.uniform(20, 80, n), "city": rng.choice(["b", "a", "c"], n),
            "visits": rng.integers(0, 9, n), "label": rng.choice(["no", "yes"], n),
            "spend": rng.normal(size=n)}


@pytest.fixture
def parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table(_table()), path, row_group_size=64)
    return path


def test_parquet_columns_and_categories(parquet):
    columns = _table()
    spec, p = _spec("data.Parquet", path=str(parquet), inputs=["age", "city", "visits"],
                    targets=["label"], target_kind="class", val_fraction=0.0)
    data = spec.build(p)
    x, y = data.tensors("train")["x"], data.tensors("train")["y"]
    assert data.categories["city"] == {"a": 0, "b": 1, "c": 2}  # sorted, numbered
    city = np.array([{"a": 0, "b": 1, "c": 2}[c] for c in columns["city"]])
    assert np.allclose(x[:, 0].numpy(), columns["age"].astype(np.float32))
    assert np.array_equal(x[:, 1].numpy(), city) and np.array_equal(x[:, 2], columns["visits"])
    assert np.array_equal(y.numpy(), (columns["label"] == "yes").astype(np.int64))


@pytest.mark.parametrize("given", [
    {"targets": ["label"], "target_kind": "class", "normalize": "zscore", "test_fraction": 0.1},
    {"targets": ["spend", "age"], "categorical": ["visits"], "val_fraction": 0.3},
])
def test_parquet_meta_and_streamed_match_the_built_dataset(parquet, given):
    _same_as_streamed("data.Parquet", path=str(parquet), **given)


def test_arrow_and_csv_tables_read_as_parquet(parquet, tmp_path):
    import pyarrow.csv as pcsv
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    table = pq.read_table(parquet)
    feather.write_feather(table, tmp_path / "t.arrow")
    pcsv.write_csv(table, tmp_path / "t.csv")
    want = _spec("data.Parquet", path=str(parquet), targets=["spend"])
    for path in ("t.arrow", "t.csv"):
        spec, p = _spec("data.Parquet", path=str(tmp_path / path), targets=["spend"])
        got = spec.build(p)
        assert spec.meta(p) == DataMeta.of(got)
        ref = want[0].build(want[1])
        assert torch.allclose(got.tensors("train")["x"], ref.tensors("train")["x"])


@pytest.mark.parametrize("suffix", ["arrow", "csv"])
def test_streamed_arrow_and_csv_match_the_built_dataset(parquet, tmp_path, suffix):
    import pyarrow.csv as pcsv
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    table = pq.read_table(parquet)
    path = tmp_path / f"t.{suffix}"
    (feather.write_feather if suffix == "arrow" else pcsv.write_csv)(table, path)
    _same_as_streamed("data.Parquet", path=str(path), targets=["label"], target_kind="class",
                      val_fraction=0.2, test_fraction=0.1)


def test_a_parquet_file_with_a_missing_column_is_named(parquet, tmp_path):
    message = _problem(tmp_path, "data.Parquet", path=str(parquet), targets=["income"])
    assert "data.Parquet 'mydata'" in message and "t.parquet" in message
    assert "no column 'income'" in message and "columns: age, city" in message


def test_a_text_column_of_ids_is_no_category(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from nodes.data import tables

    monkeypatch.setattr(tables, "MAX_CATEGORIES", 50)
    pq.write_table(pa.table({"id": [f"user{i}" for i in range(60)], "y": [0.0] * 60}),
                   tmp_path / "ids.parquet")
    spec, p = _spec("data.Parquet", path=str(tmp_path / "ids.parquet"), targets=["y"])
    with pytest.raises(NodegraphError, match="column 'id' holds more than 50 distinct"):
        spec.build(p)


def test_a_corrupt_parquet_file_is_named(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really a parquet file")
    message = _problem(tmp_path, "data.Parquet", path=str(bad), targets=["y"])
    assert "bad.parquet" in message and "cannot read table" in message


# -- Hugging Face datasets on disk --------------------------------------------------------


@pytest.fixture
def hf_folder(tmp_path):
    import datasets

    datasets.disable_progress_bars()
    rng = np.random.default_rng(2)
    features = datasets.Features({"v": datasets.List(datasets.Value("float32"), length=4),
                                  "a": datasets.Value("float64"),
                                  "label": datasets.ClassLabel(names=["p", "q", "r"])})

    def part(n):
        return datasets.Dataset.from_dict({"v": rng.normal(size=(n, 4)).astype(np.float32),
                                           "a": rng.normal(size=n),
                                           "label": rng.integers(0, 3, n)}, features=features)

    datasets.DatasetDict({"train": part(30), "validation": part(8), "test": part(6)}
                         ).save_to_disk(str(tmp_path / "dict"))
    single = part(40)
    single.save_to_disk(str(tmp_path / "single"))
    return tmp_path, single


def test_hf_columns_map_to_ports(hf_folder):
    folder, single = hf_folder
    spec, p = _spec("data.HFDataset", path=str(folder / "single"), inputs=["v", "a"],
                    val_fraction=0.0)
    data = spec.build(p)
    want = np.concatenate([np.asarray(single["v"]), np.asarray(single["a"])[:, None]], axis=1)
    assert torch.allclose(data.tensors("train")["x"], torch.as_tensor(want, dtype=torch.float32))
    assert torch.equal(data.tensors("train")["y"], torch.as_tensor(single["label"]))


@pytest.mark.parametrize(("folder", "given"), [
    ("dict", {}), ("dict", {"inputs": ["v"], "normalize": "minmax"}),
    ("single", {"val_fraction": 0.25}),
    ("single", {"inputs": ["v"], "targets": ["a"], "target_kind": "value"}),
])
def test_hf_meta_and_streamed_match_the_built_dataset(hf_folder, folder, given):
    built, _ = _same_as_streamed("data.HFDataset", path=str(hf_folder[0] / folder), **given)
    if folder == "dict":  # the saved splits are kept: validation is our val
        assert (built.size("train"), built.size("val"), built.size("test")) == (30, 8, 6)


def test_a_folder_that_is_not_a_saved_dataset_is_named(tmp_path):
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "a.txt").write_text("hello")
    message = _problem(tmp_path, "data.HFDataset", path=str(tmp_path / "photos"))
    assert "data.HFDataset 'mydata'" in message and "photos" in message
    assert "not a folder written by Hugging Face datasets" in message


# -- WebDataset shards ------------------------------------------------------------------


@pytest.fixture
def shards(tmp_path):
    import webdataset

    rng = np.random.default_rng(3)
    for s in range(4):
        with webdataset.TarWriter(str(tmp_path / f"train-{s:03d}.tar")) as sink:
            for i in range(10):
                sink.write({"__key__": f"{s}_{i:04d}",
                            "npy": rng.normal(size=(2, 3)).astype(np.float32),
                            "cls": int(rng.integers(0, 3))})
    return tmp_path


def test_shards_read_as_the_webdataset_package_reads_them(shards):
    import webdataset

    reference = webdataset.WebDataset(str(shards / "train-{000..003}.tar"),
                                      shardshuffle=False).decode()
    want = [(s["npy"], s["cls"]) for s in reference]
    spec, p = _spec("data.WebDataset", shards=str(shards / "train-{000..003}.tar"))
    data = spec.build(p)
    x, y = data.tensors("train")["x"], data.tensors("train")["y"]
    assert len(want) == len(x) == 40
    assert all(np.array_equal(x[i].numpy(), a) and int(y[i]) == b
               for i, (a, b) in enumerate(want))


@pytest.mark.parametrize("given", [
    {"shards": "train-{000..002}.tar", "val_shards": "train-003.tar"},
    {"shards": ".", "val_fraction": 0.25, "normalize": "zscore"},
    {"shards": "train-*.tar", "target_kind": "value"},
])
def test_shards_meta_and_streamed_match_the_built_dataset(shards, given):
    given = {k: (str(shards / v) if k.endswith("shards") else v) for k, v in given.items()}
    _same_as_streamed("data.WebDataset", **given)


def test_streamed_shards_are_dealt_to_ranks_and_workers(shards):
    spec, p = _spec("data.WebDataset", shards=str(shards / "train-{000..003}.tar"),
                    storage="stream", batch_size=5)
    lazy = spec.build(p)
    from nodegraph.kinds.loading import LoaderOptions

    seen = []
    for rank in range(2):
        lazy.configure(LoaderOptions(workers=2)).shard(rank, 2)
        seen.append(torch.cat([b["x"] for b in lazy.batches("train", shuffle=True)]))
    # two ranks of two workers each: every shard read once, none twice
    both = torch.cat(seen).reshape(40, -1)
    assert len(torch.unique(both, dim=0)) == 40


@pytest.mark.parametrize("cut", [700, 2000, 6000])
def test_a_truncated_shard_is_named(shards, tmp_path, cut):
    raw = (shards / "train-001.tar").read_bytes()
    (shards / "train-001.tar").write_bytes(raw[:cut])
    message = _problem(tmp_path, "data.WebDataset", shards=str(shards / "train-{000..003}.tar"))
    assert "train-001.tar" in message and "truncated" in message
    assert "data.WebDataset 'mydata'" in message


def test_image_fields_decode_with_pillow(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(6)
    pixels = rng.integers(0, 256, (3, 5, 4, 3), dtype=np.uint8)
    with tarfile.open(tmp_path / "s.tar", "w") as tar:
        for i, image in enumerate(pixels):
            buffer = io.BytesIO()
            Image.fromarray(image).save(buffer, format="PNG")
            for name, raw in ((f"{i}.png", buffer.getvalue()), (f"{i}.cls", str(i).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(raw)
                tar.addfile(info, io.BytesIO(raw))
    spec, p = _spec("data.WebDataset", shards=str(tmp_path / "s.tar"), x_field="png")
    x = spec.build(p).tensors("train")["x"]
    want = torch.from_numpy(pixels.transpose(0, 3, 1, 2).astype(np.float32) / 255)
    assert x.shape == (3, 3, 5, 4) and torch.equal(x, want)  # PNG is lossless


def test_a_shard_field_that_does_not_decode_is_named(tmp_path):
    with tarfile.open(tmp_path / "s.tar", "w") as tar:
        for name, raw in (("a.npy", b"not numpy"), ("a.cls", b"1")):
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    message = _problem(tmp_path, "data.WebDataset", shards=str(tmp_path / "s.tar"))
    assert "s.tar" in message and "cannot decode 'a.npy'" in message


# -- subword text ------------------------------------------------------------------------

CORPUS = "".join(f"The {a} {v} the {o}.\n" for a in ("cat", "dog", "bird")
                 for v in ("sees", "finds", "follows") for o in ("river", "house", "tree")) * 8


def test_bpe_tokens_decode_back_to_the_corpus(tmp_path):
    (tmp_path / "c.txt").write_text(CORPUS)
    spec, p = _spec("data.TokenizedText", path=str(tmp_path / "c.txt"), seq_len=8,
                    vocab_size=80, val_fraction=0.0)
    data = spec.build(p)
    x, y = data.tensors("train")["x"], data.tensors("train")["y"]
    tok = data.vocab.tokenizer
    assert tok.get_vocab_size() <= 80
    ids = tok.encode(CORPUS).ids
    assert len(ids) < len(CORPUS) / 2  # merges: far fewer tokens than characters
    assert tok.decode(ids) == CORPUS  # byte-level BPE is lossless
    assert torch.equal(x[0], torch.tensor(ids[:8])) and torch.equal(y[0], torch.tensor(ids[1:9]))
    assert torch.equal(x[1], torch.tensor(ids[8:16]))


def test_wordpiece_and_a_saved_tokenizer(tmp_path):
    (tmp_path / "c.txt").write_text(CORPUS)
    spec, p = _spec("data.TokenizedText", path=str(tmp_path / "c.txt"),
                    tokenizer="wordpiece", vocab_size=60, seq_len=8)
    trained = spec.build(p)
    first = trained.vocab.tokenizer.decode(trained.tensors("train")["x"][0].tolist())
    assert first.startswith("The cat sees the river")  # words whole, spaces restored
    trained.vocab.tokenizer.save(str(tmp_path / "tokenizer.json"))
    spec, q = _spec("data.TokenizedText", path=str(tmp_path / "c.txt"), tokenizer="file",
                    tokenizer_file=str(tmp_path / "tokenizer.json"), seq_len=8)
    loaded = spec.build(q)
    assert torch.equal(loaded.tensors("train")["x"], trained.tensors("train")["x"])


def test_streamed_token_contexts_match_the_built_ones(tmp_path):
    (tmp_path / "c.txt").write_text(CORPUS)
    _same_as_streamed("data.TokenizedText", path=str(tmp_path / "c.txt"), seq_len=8,
                      stride=3, vocab_size=80)


def test_a_tokenizer_file_that_does_not_parse_is_named(tmp_path):
    (tmp_path / "tokenizer.json").write_text('{"model": "not a tokenizer"')
    message = _problem(tmp_path, "data.TokenizedText", tokenizer="file",
                       tokenizer_file=str(tmp_path / "tokenizer.json"))
    assert "tokenizer.json" in message and "does not parse" in message
    assert "data.TokenizedText 'mydata'" in message


# -- MNIST IDX and NumPy, memory-mapped ---------------------------------------------------


def _idx(path, a):
    path.write_bytes(bytes([0, 0, 8, a.ndim]) + np.array(a.shape, ">u4").tobytes()
                     + a.astype(np.uint8).tobytes())


@pytest.mark.parametrize("given", [{}, {"layout": "image", "split": "stratified"}])
def test_streamed_mnist_matches_the_built_dataset(tmp_path, given):
    rng = np.random.default_rng(4)
    _idx(tmp_path / "im", rng.integers(0, 256, (60, 6, 5)))
    _idx(tmp_path / "lb", rng.integers(0, 10, 60))
    _idx(tmp_path / "tim", rng.integers(0, 256, (9, 6, 5)))
    _idx(tmp_path / "tlb", rng.integers(0, 10, 9))
    _same_as_streamed("data.MNIST", images=str(tmp_path / "im"), labels=str(tmp_path / "lb"),
                      test_images=str(tmp_path / "tim"), test_labels=str(tmp_path / "tlb"),
                      **given)


def test_streamed_numpy_is_memory_mapped(tmp_path):
    rng = np.random.default_rng(5)
    np.save(tmp_path / "x.npy", rng.normal(size=(50, 2, 3)).astype(np.float32))
    np.save(tmp_path / "y.npy", rng.integers(0, 3, 50))
    _, lazy = _same_as_streamed("data.NumPy", path=str(tmp_path / "x.npy"),
                                y_path=str(tmp_path / "y.npy"), target_kind="class",
                                normalize="zscore")
    source = lazy.sources["train"].dataset
    source[0]
    assert isinstance(source._x, np.memmap)


def test_data_larger_than_memory_validates_and_streams(cifar10, monkeypatch):
    """auto streams what the machine cannot hold, and validation counts no memory for it;
    held in memory, the same data is refused as too large."""
    monkeypatch.setenv("NODEGRAPH_MEMORY_LIMIT", "300K")  # 90 + 12 records: 1.2 MB
    g = Graph("big")
    g.add("data.CIFAR", id="data", path=str(cifar10[0]), batch_size=4)
    report = validate(g)
    assert report.problems == [] and report.data["data"].streamed
    g.set_param("data", "storage", "memory")
    assert "of memory available" in validate(g).problems[0].message
