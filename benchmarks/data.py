"""The input pipeline of a folder of JPEGs: throughput, memory and start-up against size.

(1) images/s of `data.ImageFolder` streamed (Pillow decode, resize, augmentation, batch,
    in DataLoader workers) against a hand-written torchvision `ImageFolder` + `DataLoader`
    with the same workers and the same transforms (Pillow resize, then
    torchvision.transforms.v2 RandomCrop with padding, HorizontalFlip, Normalize); passes
    over the folder alternate between the two, the ratio is of the medians (target >= 0.95);
(2) peak RSS of `nodegraph run` training one epoch on N and 10·N JPEGs of the same size
    (a linear model, 2 workers): lazy means memory does not grow with the folder (target:
    growth <= 10 %); the main process's peak from getrusage, and each worker's peak RSS
    (VmHWM, counting pages it still shares with the main process) and private memory
    (smaps_rollup), read while the persistent workers are alive;
(3) seconds from starting `nodegraph run` to the first training step, N vs 10·N images
    (target: growth <= 20 %), and `validate` of the large folder: how many images it
    decodes (target: none; it reads headers);
(4) `--startup 2000,20000,200000`: launch -> first step on folders of tiny generated JPEGs
    (16 x 16, written from 16 encoded variants so a million fit), the first start (the
    folder index built, in parallel) and the median of later ones (the index read), and
    the growth exponent of the later starts, log(t_max / t_min) / log(n_max / n_min)
    (target <= 0.1; the index lives in a temporary NODEGRAPH_CACHE, deleted after);
(4b) `--listing 2000,20000,200000`: the CPU seconds (in process) of a later start's listing
    and index read, median of `--passes`, and their growth exponent (the listing kept from
    the first start while no class folder changed: no `lstat` a file);
(5) `--tutorial`: the pipeline torchvision's tutorials write by hand (ImageFolder,
    ToImage, RandomResizedCrop on the whole decoded photo, flip, ColorJitter on uint8,
    ToDtype, Normalize; the same workers) against `data.ImageFolder` with no size and the
    same chain, on crops of scikit-learn's sample photographs brought to 200-800 px, mixed
    JPEG and PNG; images/s over the training split and over the eval transform (Resize +
    CenterCrop), median of `--passes` interleaved passes (target >= 1.0x).

Run: `python benchmarks/data.py` (N = 2,000); `--small` for N = 500 on a loaded machine.
Prints the figures and appends them to benchmarks/results/data.jsonl.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SIZE, CROP_PAD, BATCH = 48, 4, 64
MEAN, STD = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]


def _maker():
    spec = importlib.util.spec_from_file_location("make_shapes_jpegs",
                                                  ROOT / "examples" / "make_shapes_jpegs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write(root: Path, n: int, side: int = 64) -> Path:
    if not root.exists():
        _maker().write_folder(root, per_class=n // 4, seed=0, size=(side, side))
    return root


def graph(folder: Path, workers: int, linear: bool = True):
    import nodegraph

    g = nodegraph.Graph("bench-data")
    g.add("data.ImageFolder", id="data", path=str(folder), size=SIZE, batch_size=BATCH,
          val_fraction=0.0, storage="stream")
    g.add("augment.RandomCrop", id="crop", padding=CROP_PAD)
    g.add("augment.HorizontalFlip", id="flip")
    g.add("augment.Normalize", id="norm", mean=MEAN, std=STD)
    g.connect(("crop", "transform"), ("flip", "input"))
    g.connect(("flip", "transform"), ("norm", "input"))
    g.connect(("norm", "transform"), ("data", "augment"))
    g.add("layers.Flatten", id="flat")
    g.add("layers.Linear", id="out", out_features=4)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.SGD", id="opt", lr=0.01)
    g.connect(("data", "x"), ("flat", "input"))
    g.connect(("flat", "output"), ("out", "input"))
    g.connect(("out", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    g.update_training({"epochs": 1, "seed": 0, "workers": workers, "threads": 1})
    return g


# -- (1) throughput ------------------------------------------------------------------------

def ours(folder: Path, workers: int):
    import nodegraph
    from nodegraph.kinds.loading import LoaderOptions

    compiled = nodegraph.compile(graph(folder, workers), for_training=False)
    ds = compiled.datasets["data"]
    ds.configure(LoaderOptions(workers=workers, persistent_workers=True))
    gen = torch.Generator().manual_seed(0)
    return lambda: sum(len(b["x"]) for b in ds.batches("train", True, gen))


def by_hand(folder: Path, workers: int):
    """torchvision's ImageFolder + DataLoader, written as a tutorial would."""
    from nodegraph.model.packages import load_torchvision

    load_torchvision()
    from PIL import Image
    from torchvision.datasets import ImageFolder
    from torchvision.transforms import v2

    transform = v2.Compose([
        v2.Lambda(lambda img: img.convert("RGB").resize((SIZE, SIZE), Image.BILINEAR)),
        v2.PILToTensor(), v2.ToDtype(torch.float32, scale=True),
        v2.RandomCrop(SIZE, padding=CROP_PAD), v2.RandomHorizontalFlip(),
        v2.Normalize(MEAN, STD)])
    ds = ImageFolder(str(folder), transform=transform)
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True,
                                         num_workers=workers,
                                         persistent_workers=workers > 0)
    return lambda: sum(len(x) for x, _ in loader)


def throughput(folder: Path, n: int, workers: int, passes: int) -> dict:
    mine, theirs = ours(folder, workers), by_hand(folder, workers)
    mine(), theirs()  # warm: workers started, files in the page cache
    times: dict[str, list[float]] = {"ours": [], "torchvision": []}
    for _ in range(passes):
        for name, fn in (("ours", mine), ("torchvision", theirs)):
            began = time.perf_counter()
            count = fn()
            times[name].append(time.perf_counter() - began)
            assert count == n, (name, count)
    rate = {k: n / statistics.median(v) for k, v in times.items()}
    return {"images_per_s": {k: round(v, 1) for k, v in rate.items()},
            "throughput_ratio": round(rate["ours"] / rate["torchvision"], 3)}


# -- (2) and (3): whole runs in fresh processes --------------------------------------------

def _child(args: list[str], env: dict | None = None) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                         timeout=3000)
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def child_first_step(folder: str, workers: int, started: float) -> None:
    """What `nodegraph run` does up to the first step, timed from the parent's start."""
    import nodegraph
    from nodegraph.model.events import Emitter, StepEnded

    events = Emitter()

    def first(event):
        print(json.dumps({"first_step_s": time.time() - started}), flush=True)
        os._exit(0)
    events.subscribe(first, StepEnded)
    g = graph(Path(folder), workers)
    nodegraph.validate(g, for_training=True).raise_if_errors()
    nodegraph.train(g, events=events)


def _workers() -> list[int]:
    """Pids of this process's children (the DataLoader workers, alive: persistent)."""
    me, pids = os.getpid(), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == me:
            pids.append(int(stat.parent.name))
    return pids


def _status(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _private(pid: int) -> float:
    """MB only this process holds (not pages still shared with its parent)."""
    total = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            total += int(line.split()[1])
    return total / 1024


def child_epoch_rss(folder: str, workers: int) -> None:
    """One epoch of training; the peak RSS of this process, and of its workers their peak
    RSS (pages shared with this process included) and the memory that is theirs alone."""
    import nodegraph

    result = nodegraph.train(graph(Path(folder), workers))  # kept: its workers stay alive
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = _workers()
    assert result.history
    print(json.dumps({"rss_mb": round(own / 1024, 1),
                      "worker_rss_mb": round(max([_status(p, "VmHWM") for p in kids] or [0]), 1),
                      "worker_private_mb": round(max([_private(p) for p in kids] or [0]), 1)}))


def child_validate(folder: str) -> None:
    import nodegraph
    from nodes.data import _images

    calls = {"decode": 0}
    real = _images.decode

    def counted(path):
        calls["decode"] += 1
        return real(path)
    _images.decode = counted
    began = time.perf_counter()
    report = nodegraph.validate(graph(Path(folder), 0), for_training=True)
    print(json.dumps({"ok": report.ok, "validate_s": round(time.perf_counter() - began, 3),
                      "decoded": calls["decode"]}))


# -- (4) start-up against the folder's size, with the folder index ------------------------

def write_tiny(root: Path, n: int, classes: int = 4, side: int = 16) -> Path:
    """`n` tiny JPEGs in `classes` class folders, written from 16 encoded variants."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    blobs = []
    for _ in range(16):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(
            buf, "JPEG", quality=80)
        blobs.append(buf.getvalue())
    for c in range(classes):
        (root / f"c{c}").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"c{i % classes}" / f"{i:07d}.jpg").write_bytes(blobs[i % 16])
    return root


def startup(base: Path, counts: list[int], workers: int, runs: int) -> dict:
    """Launch -> first step per folder size: the first start and the later ones."""
    env = {"NODEGRAPH_CACHE": str(base / "cache")}
    out: dict = {}
    for n in counts:
        folder = write_tiny(base / f"tiny_{n}", n)
        cold = _child(["--child", "first", str(folder), str(workers), repr(time.time())],
                      env)["first_step_s"]
        warm = [_child(["--child", "first", str(folder), str(workers), repr(time.time())],
                       env)["first_step_s"] for _ in range(runs)]
        os.environ["NODEGRAPH_CACHE"] = env["NODEGRAPH_CACHE"]  # the index just built
        out[n] = {"first_start_s": round(cold, 2),
                  "later_start_s": round(statistics.median(warm), 2),
                  "listing_cpu_s": round(listing_cpu(folder, 5), 4)}
        print(f"(4) {n:,} files: first start {cold:.1f} s, later {out[n]['later_start_s']} s, "
              f"later listing + index {out[n]['listing_cpu_s']} s CPU in process (load "
              f"{os.getloadavg()[0]:.1f})", flush=True)
        shutil.rmtree(folder)
    lo, hi = min(counts), max(counts)
    exponent = math.log(out[hi]["later_start_s"] / out[lo]["later_start_s"]) / math.log(hi / lo)
    listing = math.log(out[hi]["listing_cpu_s"] / out[lo]["listing_cpu_s"]) / math.log(hi / lo)
    return {"startup": out, "startup_exponent": round(exponent, 3),
            "listing_exponent": round(listing, 3),
            "beyond_smallest_s": round(out[hi]["later_start_s"] - out[lo]["later_start_s"], 2)}


def listing_cpu(folder: Path, repeats: int) -> float:
    """In-process CPU seconds of a later start's listing + index read of `folder` (the
    index built first if it is not yet), the median of `repeats`."""
    from nodegraph.kinds import folder_index
    from nodes.data import _images

    read = _images.LocalHeaders("apply")

    def once() -> float:
        began = time.process_time()
        folder_index.index(_images.list_images(str(folder)), "image-header exif=apply", read)
        return time.process_time() - began
    once()
    return statistics.median(once() for _ in range(repeats))


def listing_cost(base: Path, counts: list[int], repeats: int) -> dict:
    """`listing_cpu` per folder size, and the growth exponent."""
    os.environ["NODEGRAPH_CACHE"] = str(base / "cache")
    out: dict = {}
    for n in counts:
        folder = write_tiny(base / f"tiny_{n}", n)
        cpu = listing_cpu(folder, repeats)
        out[n] = {"cpu_s": round(cpu, 4), "us_per_file": round(cpu / n * 1e6, 2)}
        print(f"(4b) {n:,} files: list + index {cpu:.3f} s CPU (load "
              f"{os.getloadavg()[0]:.1f})", flush=True)
        shutil.rmtree(folder)
    lo, hi = min(counts), max(counts)
    return {"listing": out, "listing_exponent": round(
        math.log(out[hi]["cpu_s"] / out[lo]["cpu_s"]) / math.log(hi / lo), 3)}


# -- (5) the tutorial pipeline ---------------------------------------------------------------

CROP, JITTER = 224, (0.4, 0.4, 0.4, 0.0)
IMAGENET = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])


def photographs(root: Path, n: int) -> Path:
    """`n` crops of scikit-learn's sample photographs, resized to 200-800 px a side,
    two classes, three JPEGs to one PNG."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_sample_images

    rng = np.random.default_rng(0)
    sources = [Image.fromarray(a) for a in load_sample_images().images]
    for i in range(n):
        img = sources[i % len(sources)]
        w, h = rng.integers(120, img.width), rng.integers(120, img.height)
        x, y = rng.integers(0, img.width - w + 1), rng.integers(0, img.height - h + 1)
        side = rng.integers(200, 801, 2)
        crop = img.crop((int(x), int(y), int(x + w), int(y + h))).resize(
            (int(side[0]), int(side[1])), Image.BILINEAR)
        folder = root / f"k{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        crop.save(folder / f"{i:05d}.{'png' if i % 4 == 3 else 'jpg'}", quality=90)
    return root


def tutorial_graph(folder: Path):
    import nodegraph

    g = nodegraph.Graph("bench-tutorial")
    g.add("data.ImageFolder", id="data", path=str(folder), batch_size=BATCH,
          val_fraction=0.0, storage="stream")
    g.add("augment.RandomResizedCrop", id="crop", size=CROP)
    g.add("augment.HorizontalFlip", id="flip")
    g.add("augment.ColorJitter", id="jitter", brightness=JITTER[0], contrast=JITTER[1],
          saturation=JITTER[2], hue=JITTER[3])
    g.add("augment.Normalize", id="norm", mean=IMAGENET[0], std=IMAGENET[1])
    for a, b in (("crop", "flip"), ("flip", "jitter"), ("jitter", "norm")):
        g.connect((a, "transform"), (b, "input"))
    g.connect(("norm", "transform"), ("data", "augment"))
    g.add("layers.Flatten", id="flat")
    g.add("layers.Linear", id="out", out_features=2)
    g.add("losses.CrossEntropy", id="loss")
    g.add("optimizers.SGD", id="opt", lr=0.01)
    g.connect(("data", "x"), ("flat", "input"))
    g.connect(("flat", "output"), ("out", "input"))
    g.connect(("out", "output"), ("loss", "input"))
    g.connect(("data", "y"), ("loss", "target"))
    g.connect(("loss", "loss"), ("opt", "loss"))
    return g


def ours_tutorial(folder: Path, workers: int, split: str):
    import nodegraph
    from nodegraph.kinds.loading import LoaderOptions

    ds = nodegraph.compile(tutorial_graph(folder), for_training=False).datasets["data"]
    ds.configure(LoaderOptions(workers=workers, persistent_workers=True))
    gen = torch.Generator().manual_seed(0)
    if split == "eval":  # the val split's transform and decoding over the same files
        ds.transforms["train"] = ds.transforms["val"]
        ds.sources["train"].side = CROP  # what RandomResizedCrop's eval part needs
    return lambda: sum(len(b["x"]) for b in ds.batches("train", split == "train", gen))


def tutorial_by_hand(folder: Path, workers: int, split: str):
    """torchvision's ImageFolder + DataLoader as its tutorials write it."""
    from nodegraph.model.packages import load_torchvision

    load_torchvision()
    from torchvision.datasets import ImageFolder
    from torchvision.transforms import v2

    head = ([v2.RandomResizedCrop(CROP, antialias=True), v2.RandomHorizontalFlip(),
             v2.ColorJitter(*JITTER)] if split == "train" else
            [v2.Resize(CROP, antialias=True), v2.CenterCrop(CROP)])
    transform = v2.Compose([v2.ToImage(), *head, v2.ToDtype(torch.float32, scale=True),
                            v2.Normalize(*IMAGENET)])
    ds = ImageFolder(str(folder), transform=transform)
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=split == "train",
                                         num_workers=workers,
                                         persistent_workers=workers > 0)
    return lambda: sum(len(x) for x, _ in loader)


def tutorial(folder: Path, n: int, workers: int, passes: int) -> dict:
    out: dict = {}
    for split in ("train", "eval"):
        mine, theirs = ours_tutorial(folder, workers, split), tutorial_by_hand(folder, workers,
                                                                                split)
        mine(), theirs()  # warm: workers started, files in the page cache
        times: dict[str, list[float]] = {"ours": [], "torchvision": []}
        for _ in range(passes):
            for name, fn in (("ours", mine), ("torchvision", theirs)):
                began = time.perf_counter()
                count = fn()
                times[name].append(time.perf_counter() - began)
                assert count == n, (name, count)
        rate = {k: n / statistics.median(v) for k, v in times.items()}
        out[split] = {"images_per_s": {k: round(v, 1) for k, v in rate.items()},
                      "ratio": round(rate["ours"] / rate["torchvision"], 3)}
        print(f"(5) {split}: images/s {out[split]['images_per_s']}, ratio "
              f"{out[split]['ratio']} (load {os.getloadavg()[0]:.1f})", flush=True)
    return {"tutorial": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="N = 500 (a loaded machine)")
    parser.add_argument("--n", type=int, default=2000, help="images of the small folder")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--passes", type=int, default=5, help="alternating passes in (1)")
    parser.add_argument("--runs", type=int, default=3, help="runs per size in (2), (3)")
    parser.add_argument("--dir", default=None, help="keep the folders here (default: temp)")
    parser.add_argument("--startup", default=None, help="(4) only: comma-separated file "
                        "counts, e.g. 2000,20000,200000")
    parser.add_argument("--listing", default=None, help="(4b) only: comma-separated file "
                        "counts; CPU time of a later start's listing + index, in process")
    parser.add_argument("--tutorial", type=int, default=None, metavar="N",
                        help="(5) only: N photographs against the tutorial pipeline")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "first":
            child_first_step(rest[0], int(rest[1]), float(rest[2]))
        elif kind == "rss":
            child_epoch_rss(rest[0], int(rest[1]))
        else:
            child_validate(rest[0])
        return
    if args.startup or args.tutorial or args.listing:
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            result: dict = {"workers": args.workers, "cpus": os.cpu_count(),
                            "load": os.getloadavg()[0]}
            if args.tutorial:
                result.update(tutorial(photographs(Path(tmp) / "photos", args.tutorial),
                                       args.tutorial, args.workers, args.passes))
            if args.listing:
                result.update(listing_cost(Path(tmp), [int(c) for c in
                                                       args.listing.split(",")], args.passes))
            if args.startup:
                counts = [int(c) for c in args.startup.split(",")]
                result.update(startup(Path(tmp), counts, args.workers, args.runs))
        _record(result)
        return
    n = 500 if args.small else args.n
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.dir or tmp)
        small, large = write(base / f"jpegs_{n}", n), write(base / f"jpegs_{10 * n}", 10 * n)
        result: dict = {"n": n, "workers": args.workers, "cpus": os.cpu_count(),
                        "load": os.getloadavg()[0]}
        result.update(throughput(small, n, args.workers, args.passes))
        print(f"(1) images/s: {result['images_per_s']}  throughput_ratio: "
              f"{result['throughput_ratio']}", flush=True)
        rss: dict[int, list] = {n: [], 10 * n: []}
        first: dict[int, list] = {n: [], 10 * n: []}
        for _ in range(args.runs):
            for count, folder in ((n, small), (10 * n, large)):
                rss[count].append(_child(["--child", "rss", str(folder), str(args.workers)]))
                first[count].append(_child(["--child", "first", str(folder), str(args.workers),
                                            repr(time.time())])["first_step_s"])
        peak = {c: max(r["rss_mb"] for r in v) for c, v in rss.items()}
        start = {c: statistics.median(v) for c, v in first.items()}
        result.update({
            "peak_rss_mb": peak, "worker_peak_rss_mb": {c: max(r["worker_rss_mb"] for r in v)
                                                        for c, v in rss.items()},
            "worker_private_mb": {c: max(r["worker_private_mb"] for r in v)
                                  for c, v in rss.items()},
            "rss_growth": round(peak[10 * n] / peak[n] - 1, 3),
            "first_step_s": {c: round(s, 2) for c, s in start.items()},
            "first_step_growth": round(start[10 * n] / start[n] - 1, 3),
            "validate_large": _child(["--child", "validate", str(large)])})
        print(f"(2) peak RSS MB {peak}: growth {result['rss_growth']:+.1%}; workers: peak RSS "
              f"{result['worker_peak_rss_mb']}, their own memory {result['worker_private_mb']}")
        print(f"(3) first step s {result['first_step_s']}: growth "
              f"{result['first_step_growth']:+.1%}; validate of {10 * n} images: "
              f"{result['validate_large']}")
    _record(result)


def _record(result: dict) -> None:
    out = ROOT / "benchmarks" / "results" / "data.jsonl"
    with out.open("a") as f:
        f.write(json.dumps({"when": time.strftime("%Y-%m-%d %H:%M"), **result}) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
