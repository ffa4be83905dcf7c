"""How many real architectures `nodegraph import` brings in, and how faithfully.

For every classification model of `torchvision.models` and the most used timm
architectures (random weights, nothing downloaded) it imports the model on one small
input and checks each way out against the model itself (`nodegraph.interop.fx_roundtrip`):
compiled graph, Python export, ONNX export, one training step. One row per model, then the
totals. Each model runs in its own process (a crash or a hang costs one row).

    OMP_NUM_THREADS=1 python benchmarks/import_models.py [--only NAME ...] [--timm-only]
        [--torchvision-only] [--timeout S] [--ways validate,python,onnx,train]
        [--rows FILE.jsonl] [--markdown FILE.md] [--table-only]

With --rows each row is appended to a JSON-lines file as soon as it finishes, and a later
run resumes from it (models already there are skipped, except those named by --only,
whose new rows replace the old): a crash or a deadline loses at most the model in flight.
--markdown writes the whole table (every row in the file) with its totals.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# The 30 most used timm architectures (by downloads of their pretrained weights), as the
# smallest variant of each family; created with random weights.
TIMM = [
    "resnet18", "resnet50d", "resnet10t", "efficientnet_b0", "efficientnetv2_rw_t",
    "mobilenetv3_small_100", "mobilenetv3_large_100", "mobilenetv2_100", "vit_tiny_patch16_224",
    "deit_tiny_patch16_224", "convnext_atto", "convnextv2_atto", "regnety_002",
    "regnetx_002", "resnext26ts", "seresnext26d_32x4d", "densenet121", "dla34",
    "ghostnet_100", "levit_128s", "mixer_b16_224", "convmixer_768_32", "efficientformer_l1",
    "swin_tiny_patch4_window7_224", "tf_efficientnet_b0", "mnasnet_100", "rexnet_100",
    "hrnet_w18_small", "cspresnet50", "mobilevitv2_050",
]
# fixed-size inputs (attention over a fixed token grid); the rest take a small image
TIMM_SIZE = {"vit_tiny_patch16_224": 224, "deit_tiny_patch16_224": 224, "levit_128s": 224,
             "mixer_b16_224": 224, "efficientformer_l1": 224,
             "swin_tiny_patch4_window7_224": 224, "mobilevitv2_050": 256,
             "hrnet_w18_small": 64}
TORCHVISION_SIZE = {"vit_": 224, "swin_": 224, "maxvit_t": 224, "inception_v3": 299,
                    "alexnet": 224, "vgg": 224,
                    "googlenet": 64}


def torchvision_models() -> list[str]:
    from nodegraph.model.packages import load_torchvision

    tv = load_torchvision()
    return sorted(tv.models.list_models(module=tv.models))


def size_of(source: str, name: str) -> int:
    if source == "timm":
        return TIMM_SIZE.get(name, 64)
    return next((s for k, s in TORCHVISION_SIZE.items() if name.startswith(k)), 64)


def one(source: str, name: str, ways: tuple[str, ...]) -> dict:
    """Import and round-trip one model (in this process)."""
    import torch

    from nodegraph.interop.fx_roundtrip import round_trip

    torch.manual_seed(0)
    size = size_of(source, name)
    x = torch.randn(2, 3, size, size)
    target = f"timm:{name}" if source == "timm" else f"torchvision.models:{name}"
    kwargs = {"num_classes": 10}
    if name in ("inception_v3", "googlenet"):  # with their training-only aux heads
        kwargs["init_weights"] = False
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        try:
            r = round_trip(target, (x,), folder, kwargs, ways=ways)
        except Exception as e:
            return {"ok": False, "error": f"{type(e).__name__}: {' '.join(str(e).split())[:200]}",
                    "import_s": time.perf_counter() - start}
    return {"ok": not r.errors, "nodes": r.nodes, "opaque": r.opaque, "import_s": r.import_s,
            "compiled": r.compiled, "python": r.python, "onnx": r.onnx, "trained": r.trained,
            "error": "; ".join(f"{k}: {v}" for k, v in r.errors.items())}


# models whose import and export take minutes (and may need ONNX's external data)
BIG = ("vit_h_14", "vit_l_", "regnet_y_128gf", "regnet_y_32gf", "regnet_y_16gf",
       "vit_b_", "efficientnet_b7", "efficientnet_b6", "regnet_x_32gf", "mixer_b16",
       "convnext_large", "swin_v2_b", "swin_b", "maxvit_t")


def read_rows(path: str) -> dict[tuple[str, str], dict]:
    """The rows of a JSON-lines file by (source, model); a later row replaces an earlier."""
    rows: dict[tuple[str, str], dict] = {}
    if os.path.exists(path):
        with open(path) as fh:
            for line in fh:
                if line.strip():
                    r = json.loads(line)
                    rows[(r["source"], r["model"])] = r
    return rows


def totals(rows: list[dict]) -> list[str]:
    out = []
    for source in ("torchvision", "timm"):
        mine = [r for r in rows if r["source"] == source]
        if mine:
            ok = [r for r in mine if r["ok"]]
            imported = [r for r in mine if "nodes" in r]
            out.append(f"{source}: {len(ok)} of {len(mine)} round-trip, {len(imported)} "
                       f"import; nodes {sum(r['nodes'] for r in imported)}, opaque "
                       f"{sum(r['opaque'] for r in imported)}; import time "
                       f"{sum(r.get('import_s', 0) for r in imported):.0f} s")
    ok = sum(r["ok"] for r in rows)
    out.append(f"total: {ok} of {len(rows)} models make the whole round trip")
    return out


def markdown(rows: list[dict], ways: tuple[str, ...], pending: list[str] = ()) -> str:
    """The table as Markdown: one row per model, then the totals."""
    def f(v):
        return "-" if v is None else f"{v:.1e}" if isinstance(v, float) else str(v)

    rows = sorted(rows, key=lambda r: (r["source"] != "torchvision", r["model"]))
    lines = ["# `nodegraph import` on torchvision and timm classification models", "",
             "Generated by `benchmarks/import_models.py --rows ... --markdown ...` "
             f"(ways: {', '.join(ways)}). Diffs are the largest relative difference to the "
             "module's own output; random weights, nothing downloaded.", "",
             *(f"- {t}" for t in totals(rows)),
             *([f"- not run yet: {len(pending)} of {len(rows) + len(pending)} "
                f"({', '.join(pending)})"] if pending else []), "",
             "| source | model | ok | nodes | opaque | compiled | python | onnx | train "
             "| import s | error |", "|" + "---|" * 11]
    for r in rows:
        err = r.get("error", "").replace("|", "\\|")[:200]
        lines.append(f"| {r['source']} | {r['model']} | {'yes' if r['ok'] else '**no**'} "
                     f"| {f(r.get('nodes'))} | {f(r.get('opaque'))} | {f(r.get('compiled'))} "
                     f"| {f(r.get('python'))} | {f(r.get('onnx'))} | {f(r.get('trained'))} "
                     f"| {r.get('import_s', 0):.1f} | {err} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", default=None, help="model names to run")
    ap.add_argument("--timm-only", action="store_true")
    ap.add_argument("--torchvision-only", action="store_true")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--ways", default="validate,python,onnx,train")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--rows", help="append each row to this JSON-lines file; resume from it")
    ap.add_argument("--markdown", help="write the table of every row in --rows here")
    ap.add_argument("--table-only", action="store_true",
                    help="only write --markdown from the rows in --rows (a run in progress)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    ways = tuple(w for w in args.ways.split(",") if w)
    if args.child:
        print(json.dumps(one(*args.child, ways)))
        return 0
    if args.table_only:
        done = read_rows(args.rows)
        every = [("torchvision", n) for n in torchvision_models()] + [("timm", n) for n in TIMM]
        pending = [f"{s}:{n}" for s, n in every if (s, n) not in done]
        with open(args.markdown, "w") as fh:
            fh.write(markdown(list(done.values()), ways, pending))
        print("\n".join(totals(list(done.values()))))
        print(f"not run yet: {len(pending)} of {len(every)}")
        return 0
    jobs = []
    if not args.timm_only:
        jobs += [("torchvision", n) for n in torchvision_models()]
    if not args.torchvision_only:
        jobs += [("timm", n) for n in TIMM]
    if args.only:
        jobs = [j for j in jobs if j[1] in args.only]
    done_rows = read_rows(args.rows) if args.rows else {}
    if not args.only:
        jobs = [j for j in jobs if j not in done_rows]
    # the largest models last, so the many small ones are in the table early
    jobs.sort(key=lambda j: any(b in j[1] for b in BIG))
    rows = []
    print(f"{'source':12} {'model':32} {'ok':3} {'nodes':>6} {'opaque':>6} {'compiled':>9} "
          f"{'python':>9} {'onnx':>9} {'train':>5} {'import s':>8}  error", flush=True)
    for source, name in jobs:
        try:
            done = subprocess.run([sys.executable, __file__, "--child", source, name,
                                   "--ways", ",".join(ways)], capture_output=True, text=True,
                                  timeout=args.timeout)
            lines = done.stdout.strip().splitlines()
            row = json.loads(lines[-1]) if lines else {
                "ok": False, "error": " ".join(done.stderr.split())[-200:]}
        except subprocess.TimeoutExpired:
            row = {"ok": False, "error": f"timed out after {args.timeout:.0f} s"}
        except json.JSONDecodeError:
            row = {"ok": False, "error": " ".join(done.stderr.split())[-200:]}
        row.update(source=source, model=name)
        rows.append(row)
        if args.rows:
            with open(args.rows, "a") as fh:
                fh.write(json.dumps(row) + "\n")

        def f(v):
            return "-" if v is None else f"{v:.1e}" if isinstance(v, float) else str(v)

        print(f"{source:12} {name:32} {'yes' if row['ok'] else 'NO':3} "
              f"{f(row.get('nodes')):>6} {f(row.get('opaque')):>6} "
              f"{f(row.get('compiled')):>9} {f(row.get('python')):>9} "
              f"{f(row.get('onnx')):>9} {f(row.get('trained')):>5} "
              f"{row.get('import_s', 0):8.1f}  {row.get('error', '')[:160]}", flush=True)
    print()
    print("\n".join(totals(rows)))
    if args.rows and args.markdown:
        all_rows = read_rows(args.rows)
        with open(args.markdown, "w") as fh:
            fh.write(markdown(list(all_rows.values()), ways))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
