"""Write the data files the file-format examples train on; nothing is downloaded.

    python examples/make_data.py            # every set, full size, into examples/data/full/
    python examples/make_data.py cifar parquet --out /tmp/somewhere
    python examples/make_data.py --sample   # the small samples shipped in examples/data/

The examples' graphs name the samples (examples/data/, in git, about 1.4 MB together), so
every example validates and trains on a fresh clone; the figures of the READMEs come from
the full-size sets (`--set data.path=data/full/...`), which this writes in seconds.

Each set is made by a seeded generator in the format people bring their own data in:

- `cifar`: `data/cifar-10-batches-bin/`, CIFAR-10's binary files (data_batch_1..5.bin,
  test_batch.bin, batches.meta.txt): 32x32 colour images of 10 classes, each class a hue
  (5 of them, shifted per image) with faint stripes across or down (2 orientations),
  under noise;
- `parquet`: `data/customers.parquet`, a churn table with number and text columns, in
  row groups of 500 rows;
- `corpus`: `data/corpus.txt`, sentences of a small English grammar, for BPE;
- `hf`: `data/signals_hf/`, a Hugging Face DatasetDict (train, test) saved with
  save_to_disk: 16-value signals (a list column) and a ClassLabel;
- `shards`: `data/signals_wds/`, the same kind of signals as WebDataset tar shards
  (train-000..007.tar, val-000.tar), `KEY.npy` + `KEY.cls` per sample.

The examples' graphs name these paths relative to examples/, the folder of the graphs.
The samples are the same generators at smaller sizes (`SAMPLE`), byte for byte the same on
every run.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

from nodes.data.cifar import write_cifar as write_records

HERE = Path(__file__).resolve().parent
HUES = np.array([[1.0, 0.2, 0.2], [0.2, 1.0, 0.2], [0.2, 0.3, 1.0], [1.0, 1.0, 0.2],
                 [0.9, 0.2, 1.0]])


def cifar_images(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n images (n, 3, 32, 32) uint8 and labels: class = 2 x hue + orientation."""
    labels = rng.integers(0, 10, n)
    hue, across = HUES[labels // 2], labels % 2 == 0
    t = np.arange(32)
    phase = rng.uniform(0, 2 * np.pi, n)
    wave = 0.5 + 0.5 * np.sin(2 * np.pi * t[None] / 8 + phase[:, None])  # (n, 32)
    stripes = np.where(across[:, None, None], wave[:, :, None], wave[:, None, :])
    stripes = np.broadcast_to(stripes, (n, 32, 32))
    # faint stripes and hues shifted per image, under noise: classes overlap a little
    contrast = rng.uniform(0.2, 0.6, n)[:, None, None, None]
    tint = hue + rng.normal(0, 0.2, (n, 3))
    pixels = tint[:, :, None, None] * (0.6 + contrast * (stripes[:, None] - 0.5))
    pixels = pixels + rng.normal(0, 0.3, pixels.shape)
    return (np.clip(pixels, 0, 1) * 255).round().astype(np.uint8), labels


def write_cifar(out: Path, per_batch: int = 1000, test: int = 1000, seed: int = 0) -> Path:
    """CIFAR-10's binary layout: records of one label byte and 3,072 pixel bytes."""
    folder = out / "cifar-10-batches-bin"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)

    def save(name: str, n: int) -> None:
        write_records(folder / name, *cifar_images(n, rng))

    for i in range(1, 6):
        save(f"data_batch_{i}.bin", per_batch)
    save("test_batch.bin", test)
    names = [f"{h}_{o}" for h in ("red", "green", "blue", "yellow", "violet")
             for o in ("across", "down")]
    (folder / "batches.meta.txt").write_text("\n".join(names) + "\n")
    return folder


def customers(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A churn table: the odds of leaving rise with price and support calls, fall with
    tenure, and depend on the plan (text) and region (text)."""
    rng = np.random.default_rng(seed)
    plans, regions = np.array(["basic", "plus", "pro"]), np.array(["north", "south", "east",
                                                                    "west"])
    plan, region = rng.integers(0, 3, n), rng.integers(0, 4, n)
    tenure = rng.integers(1, 73, n)
    calls = rng.poisson(2.0, n)
    price = 20 + 15 * plan + rng.normal(0, 5, n)
    logit = (-1.0 + 0.08 * (price - 35) + 0.6 * (calls - 2) - 0.05 * (tenure - 36)
             + np.array([0.8, 0.0, -0.8])[plan] + np.array([0.0, 0.5, -0.5, 0.0])[region])
    churn = rng.random(n) < 1 / (1 + np.exp(-2 * logit))
    return {"tenure": tenure.astype(np.int64), "monthly_price": price.round(2),
            "support_calls": calls.astype(np.int64), "plan": plans[plan],
            "region": regions[region], "churn": np.where(churn, "yes", "no")}


def write_parquet(out: Path, n: int = 5000, seed: int = 0) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    path = out / "customers.parquet"
    pq.write_table(pa.table(customers(n, seed)), path, row_group_size=500)
    return path


SUBJECTS = ["the river", "the ferryman", "a small boat", "the old dog", "the wind",
            "a child", "the miller", "the heron", "the teacher", "a stranger"]
VERBS = ["crosses", "follows", "watches", "finds", "carries", "remembers", "leaves",
         "reaches"]
OBJECTS = ["the bridge", "the valley", "the village", "the stones", "the meadow",
           "the harbour", "the forest", "the mill"]
TIMES = ["in the morning", "at noon", "before the rain", "after dark", "every spring",
         "in winter"]
ENDINGS = [".", ".", ".", " again.", " slowly.", " without a word."]


def corpus(sentences: int, seed: int = 0) -> str:
    """Sentences "Subject verb object [time][ending]" in paragraphs of five."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(sentences):
        words = [rng.choice(SUBJECTS).capitalize(), rng.choice(VERBS), rng.choice(OBJECTS)]
        if rng.random() < 0.5:
            words.append(rng.choice(TIMES))
        lines.append(" ".join(words) + rng.choice(ENDINGS) + ("\n" if i % 5 == 4 else " "))
    return "".join(lines)


def write_corpus(out: Path, sentences: int = 4000, seed: int = 0) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "corpus.txt"
    path.write_text(corpus(sentences, seed), encoding="utf-8")
    return path


def signals(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n 16-value signals of 4 classes: class c is a sine of c + 1 periods, random phase,
    under noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    t = np.arange(16) / 16
    phase = rng.uniform(0, 2 * np.pi, n)
    x = np.sin(2 * np.pi * (labels[:, None] + 1) * t + phase[:, None])
    return (x + rng.normal(0, 0.8, x.shape)).astype(np.float32), labels.astype(np.int64)


def write_hf(out: Path, train: int = 2000, test: int = 500, seed: int = 0) -> Path:
    import datasets
    from datasets import ClassLabel, Dataset, DatasetDict, Features, List, Value

    datasets.disable_progress_bars()
    features = Features({"signal": List(Value("float32"), length=16),
                         "label": ClassLabel(names=["one", "two", "three", "four"])})
    parts = {}
    for name, n, s in (("train", train, seed), ("test", test, seed + 1)):
        x, y = signals(n, s)
        parts[name] = Dataset.from_dict({"signal": x, "label": y}, features=features)
    path = out / "signals_hf"
    DatasetDict(parts).save_to_disk(str(path))
    return path


def write_shard(path: Path, x: np.ndarray, y: np.ndarray, start: int) -> None:
    """One WebDataset shard: KEY.npy (the signal) and KEY.cls (its class) per sample."""
    with tarfile.open(path, "w") as tar:
        for i, (xi, yi) in enumerate(zip(x, y, strict=True)):
            buffer = io.BytesIO()
            np.save(buffer, xi)
            for ext, raw in (("npy", buffer.getvalue()), ("cls", str(int(yi)).encode())):
                info = tarfile.TarInfo(f"{start + i:07d}.{ext}")
                info.size = len(raw)
                tar.addfile(info, io.BytesIO(raw))


def write_shards(out: Path, shards: int = 8, per_shard: int = 250, val: int = 500,
                 seed: int = 0) -> Path:
    folder = out / "signals_wds"
    folder.mkdir(parents=True, exist_ok=True)
    x, y = signals(shards * per_shard, seed + 2)
    for s in range(shards):
        rows = slice(s * per_shard, (s + 1) * per_shard)
        write_shard(folder / f"train-{s:03d}.tar", x[rows], y[rows], s * per_shard)
    vx, vy = signals(val, seed + 3)
    write_shard(folder / "val-000.tar", vx, vy, shards * per_shard)
    return folder


WRITERS = {"cifar": write_cifar, "parquet": write_parquet, "corpus": write_corpus,
           "hf": write_hf, "shards": write_shards}
# what each writer makes inside its folder: the examples' graphs name these
MADE = {"cifar": "cifar-10-batches-bin", "parquet": "customers.parquet",
        "corpus": "corpus.txt", "hf": "signals_hf", "shards": "signals_wds"}


# the shipped samples' sizes: each example trains on them, in seconds, on a fresh clone
SAMPLE = {"cifar": {"per_batch": 30, "test": 60}, "parquet": {"n": 600},
          "corpus": {"sentences": 800}, "hf": {"train": 300, "test": 100},
          "shards": {"per_shard": 15, "val": 60}}
FULL = HERE / "data" / "full"  # the full-size sets, not in git


def ensure(out: Path = FULL) -> None:
    """Write the sets missing from `out`, each into a fresh folder first and then renamed
    into place, so processes calling this at once (test workers) never see half a set."""
    for name, made in MADE.items():
        if (out / made).exists():
            continue
        out.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=out))
        try:
            WRITERS[name](scratch)
            try:
                os.rename(scratch / made, out / made)
            except OSError:  # another process made it meanwhile
                pass
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("sets", nargs="*", help=f"which of {', '.join(WRITERS)} (default: all)")
    parser.add_argument("--out", type=Path, help="the folder to write (default: "
                        "examples/data/full, with --sample examples/data)")
    parser.add_argument("--sample", action="store_true",
                        help="the small samples the examples ship with (examples/data)")
    args = parser.parse_args(argv)
    unknown = [s for s in args.sets if s not in WRITERS]
    if unknown:
        parser.error(f"no data set {unknown[0]!r}; choose from {', '.join(WRITERS)}")
    out = args.out or (HERE / "data" if args.sample else FULL)
    for name in args.sets or WRITERS:
        if args.sample:
            shutil.rmtree(out / MADE[name], ignore_errors=True)  # a smaller set, no leftovers
        print(f"wrote {WRITERS[name](out, **(SAMPLE[name] if args.sample else {}))}")


if __name__ == "__main__":
    main(sys.argv[1:])
