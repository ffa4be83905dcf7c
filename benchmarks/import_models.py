"""How many real architectures `nodegraph import` brings in, and how faithfully.

For every classification model of `torchvision.models`, the most used timm architectures,
80 more timm families, torchvision's segmentation, video and optical-flow models and the
modules of `tests/written_models.py` (a GPT, a BERT with a mask, a seq2seq LSTM; random
weights, nothing downloaded) it imports the model on one small input and checks each way
out against the model itself (`nodegraph.interop.fx_roundtrip`): compiled graph, Python
export, ONNX export, one training step, and the graph at a second input size. One row per
model, then the totals. Each model runs in its own process (a crash or a hang costs one
row). With --hf, the Hugging Face transformers and diffusers models of
`tests/hf_cases.py`, the modules people write around them (`tests/hf_wrappers.py`,
rows `wrap_*`) and models first tried for the hidden check (`tests/hf_unseen.py`, rows
`new_*`) instead (tiny random configs, two input sizes each; fx first, then
torch.export where fx cannot import them, as `nodegraph import` does).

    OMP_NUM_THREADS=1 python benchmarks/import_models.py [--only NAME ...] [--timm-only]
        [--torchvision-only] [--more-only] [--hf] [--timeout S] [--ways validate,python,onnx,train]
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
# issue #26: at least 60 more timm families, the smallest variant of each
TIMM_MORE = [
    "botnet26t_256", "cait_xxs24_224", "coat_lite_tiny", "coatnet_nano_rw_224", "convit_tiny",
    "crossvit_tiny_240", "deit3_small_patch16_224", "dpn68", "eca_resnet33ts",
    "edgenext_xx_small", "efficientformerv2_s0", "efficientvit_b0", "efficientvit_m0",
    "ese_vovnet19b_dw", "fastvit_t8", "fbnetc_100", "fbnetv3_b", "gcresnet33ts", "gernet_s",
    "ghostnetv2_100", "hardcorenas_a", "halonet26t", "hgnet_tiny", "hgnetv2_b0",
    "inception_next_tiny", "lambda_resnet26t", "lcnet_050", "legacy_seresnet18",
    "maxvit_nano_rw_256", "mixnet_s", "mnasnet_small", "mobilenetv1_100",
    "mobilenetv4_conv_small", "mobileone_s0", "mobilevit_xxs", "nest_tiny", "nf_resnet26",
    "pit_ti_224", "poolformer_s12", "poolformerv2_s12", "pvt_v2_b0", "regnetz_b16",
    "repghostnet_050", "repvgg_a0", "repvit_m0_9", "resmlp_12_224", "resnest14d",
    "resnetv2_50", "resnetblur18", "rexnetr_100", "selecsls42b", "semnasnet_050",
    "sequencer2d_s", "skresnet18", "spnasnet_100", "tf_mixnet_s", "tinynet_e",
    "visformer_tiny", "xcit_nano_12_p16_224", "gmlp_ti16_224", "convnextv2_atto",
    "davit_tiny", "focalnet_tiny_srf", "levit_conv_128s", "mambaout_femto", "starnet_s1",
    "tiny_vit_5m_224", "eva02_tiny_patch14_224", "flexivit_small",
    "deit_tiny_distilled_patch16_224", "hiera_tiny_224", "ecaresnet26t", "resnet26d",
    "efficientnet_lite0", "tf_efficientnetv2_b0", "dla46_c", "cs3darknet_focus_s",
    "bat_resnext26ts", "inception_v3",
]
# torchvision beyond classification: (name, kwargs, input shape, second input shape)
TV_MORE = {
    "fcn_resnet50": ({"num_classes": 3, "weights_backbone": None, "aux_loss": False},
                     (1, 3, 64, 64), (1, 3, 96, 80)),
    "deeplabv3_mobilenet_v3_large": ({"num_classes": 3, "weights_backbone": None},
                                     (2, 3, 64, 64), (2, 3, 96, 80)),
    "lraspp_mobilenet_v3_large": ({"num_classes": 3, "weights_backbone": None},
                                  (2, 3, 64, 64), (2, 3, 96, 80)),
    "r3d_18": ({"num_classes": 5}, (1, 3, 4, 32, 32), (1, 3, 6, 48, 40)),
    "mc3_18": ({"num_classes": 5}, (1, 3, 4, 32, 32), (1, 3, 6, 48, 40)),
    "r2plus1d_18": ({"num_classes": 5}, (1, 3, 4, 32, 32), (1, 3, 6, 48, 40)),
    "s3d": ({"num_classes": 5}, (1, 3, 16, 224, 224), (1, 3, 24, 224, 224)),  # its last
    # pooling window is (2, 7, 7): 16 frames of 224 pixels at least
    "raft_small": ({}, ((1, 3, 128, 128), (1, 3, 128, 128)),  # its correlation pyramid needs
                   ((1, 3, 192, 160), (1, 3, 192, 160))),  # 128 pixels at least
}
TV_MODULES = {"fcn_resnet50": "segmentation", "deeplabv3_mobilenet_v3_large": "segmentation",
              "lraspp_mobilenet_v3_large": "segmentation", "r3d_18": "video",
              "mc3_18": "video", "r2plus1d_18": "video", "s3d": "video",
              "raft_small": "optical_flow"}
# modules written the usual way (tests/written_models.py): (class, inputs, second inputs)
WRITTEN = ("GPT", "Bert", "Seq2Seq", "HalfCrop", "SequenceReshape", "Pooled")
# fixed-size inputs (attention over a fixed token grid); the rest take a small image
TIMM_SIZE = {"vit_tiny_patch16_224": 224, "deit_tiny_patch16_224": 224, "levit_128s": 224,
             "mixer_b16_224": 224, "efficientformer_l1": 224,
             "swin_tiny_patch4_window7_224": 224, "mobilevitv2_050": 256,
             "hrnet_w18_small": 64, "efficientformerv2_s0": 224,
             # their attention blocks need a size divisible by the block at each stage, and
             # inception's stem 75 pixels: 64 is refused by the module itself
             "halonet26t": 256, "bat_resnext26ts": 256, "inception_v3": 299}
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


def _timm_size(name: str) -> int:
    """A small image, or the size a model that takes only its own demands."""
    if name in TIMM_SIZE:
        return TIMM_SIZE[name]
    from nodegraph.model.packages import load_torchvision

    load_torchvision()
    import timm

    cfg = timm.get_pretrained_cfg(name)
    return int(cfg.input_size[-1]) if cfg is not None and cfg.fixed_input_size else 64


def job(source: str, name: str) -> tuple[object, tuple, tuple, dict]:
    """What to import, its example inputs, inputs of a second size, and its kwargs."""
    import torch

    if source == "written":
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
        import written_models as w

        def ids(b, t, vocab=40):
            return torch.randint(0, vocab, (b, t))
        cases = {"GPT": ((ids(2, 10),), (ids(3, 17),)),
                 "Bert": ((ids(2, 10), torch.ones(2, 10, dtype=torch.long)),
                          (ids(2, 13), torch.ones(2, 13, dtype=torch.long))),
                 "Seq2Seq": ((ids(2, 7), ids(2, 6)), (ids(2, 11), ids(2, 4))),
                 "HalfCrop": ((torch.randn(2, 3, 16, 16),), (torch.randn(3, 3, 32, 20),)),
                 "SequenceReshape": ((torch.randn(2, 5, 8),), (torch.randn(3, 9, 8),)),
                 "Pooled": ((torch.randn(2, 3, 10, 12),), (torch.randn(2, 3, 17, 9),))}
        inputs, other = cases[name]
        return getattr(w, name), inputs, other, {}
    if source == "hf":
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
        case = _hf_cases()[name]
        (batch, size), (batch2, size2) = case.sizes
        return case.build, case.inputs(batch, size), case.inputs(batch2, size2), {}
    if source in ("segmentation", "video", "optical_flow"):
        kwargs, shape, second = TV_MORE[name]

        def make(s):
            return tuple(torch.randn(*t) for t in s) if isinstance(s[0], tuple) else \
                (torch.randn(*s),)
        return (f"torchvision.models.{source}:{name}" if source != "optical_flow" else
                f"torchvision.models.optical_flow:{name}"), make(shape), make(second), \
            dict(kwargs)
    size = _timm_size(name) if source == "timm" else size_of(source, name)
    target = f"timm:{name}" if source == "timm" else f"torchvision.models:{name}"
    kwargs = {"num_classes": 10}
    if name in ("inception_v3", "googlenet") and source == "torchvision":
        kwargs["init_weights"] = False  # with their training-only aux heads
    second = size + size // 2
    return target, (torch.randn(2, 3, size, size),), (torch.randn(2, 3, second, second - 8),), \
        kwargs


def _hf_cases() -> dict:
    """The --hf models by name: raw models (`tests/hf_cases.py`), the modules people
    write around them (`tests/hf_wrappers.py`, named `wrap_*`), then models nobody had
    tried before issue #34's hidden check (`tests/hf_unseen.py`, named `new_*`)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from hf_cases import CASES
    from hf_unseen import UNSEEN
    from hf_wrappers import WRAPPERS

    return {case.name: case for case in CASES + WRAPPERS + UNSEEN}


def one(source: str, name: str, ways: tuple[str, ...]) -> dict:
    """Import and round-trip one model (in this process), and run the graph at a second
    input size against the module (column `size2`: the difference, or `refused`)."""
    import torch

    from nodegraph.interop.fx_roundtrip import round_trip

    torch.manual_seed(0)
    target, inputs, other, kwargs = job(source, name)
    if source != "written":  # `import s` is the import's own time, not torchvision's or
        from nodegraph.model.packages import load_torchvision  # timm's (10 s loaded)

        load_torchvision()
        if source == "timm":
            import timm  # noqa: F401
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        try:
            r = round_trip(target, inputs, folder, kwargs, ways=ways, others=[other],
                           **({"tracer": "auto"} if source == "hf" else {}))
        except Exception as e:
            return {"ok": False, "error": f"{type(e).__name__}: {' '.join(str(e).split())[:200]}",
                    "import_s": time.perf_counter() - start}
    resized = r.errors.get("resized")
    size2 = "refused" if resized and resized.startswith("refused") else r.resized
    if resized is None or size2 == "refused":  # a failure at size 2 fails the row
        r.errors.pop("resized", None)
    return {"ok": not r.errors, "nodes": r.nodes, "opaque": r.opaque, "import_s": r.import_s,
            "compiled": r.compiled, "python": r.python, "onnx": r.onnx, "trained": r.trained,
            "size2": size2, "size2_error": resized if size2 is None else None,
            "error": "; ".join(f"{k}: {v}" for k, v in r.errors.items())}


# models whose import and export take minutes (and may need ONNX's external data)
SOURCES = ("torchvision", "timm", "segmentation", "video", "optical_flow", "written", "hf")
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
    for source in SOURCES:
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

    rows = sorted(rows, key=lambda r: (SOURCES.index(r["source"]), r["model"]))
    size2 = [r for r in rows if "nodes" in r]
    follows = sum(isinstance(r.get("size2"), float) and r["size2"] <= 1e-4 for r in size2)
    refused = sum(r.get("size2") == "refused" for r in size2)
    lines = ["# `nodegraph import` on torchvision and timm models and modules written by hand",
             "", "Generated by `benchmarks/import_models.py --rows ... --markdown ...` "
             f"(ways: {', '.join(ways)}). Diffs are the largest relative difference to the "
             "module's own output; random weights, nothing downloaded. `size 2`: the "
             "compiled graph against the module at a second input size (a refusal names "
             "the size; an empty cell: the row predates the check or the module itself "
             "fails there).", "",
             f"- at a second input size: {follows} of {len(size2)} imports equal the module, "
             f"{refused} refuse the size with a message",
             *(f"- {t}" for t in totals(rows)),
             *([f"- not run yet: {len(pending)} of {len(rows) + len(pending)} "
                f"({', '.join(pending)})"] if pending else []), "",
             "| source | model | ok | nodes | opaque | compiled | python | onnx | train "
             "| size 2 | import s | error |", "|" + "---|" * 12]
    for r in rows:
        err = r.get("error", "").replace("|", "\\|")[:200]
        lines.append(f"| {r['source']} | {r['model']} | {'yes' if r['ok'] else '**no**'} "
                     f"| {f(r.get('nodes'))} | {f(r.get('opaque'))} | {f(r.get('compiled'))} "
                     f"| {f(r.get('python'))} | {f(r.get('onnx'))} | {f(r.get('trained'))} "
                     f"| {f(r.get('size2'))} | {r.get('import_s', 0):.1f} | {err} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", default=None, help="model names to run")
    ap.add_argument("--timm-only", action="store_true")
    ap.add_argument("--torchvision-only", action="store_true")
    ap.add_argument("--more-only", action="store_true",
                    help="only the models issue #26 added (more timm families, torchvision "
                    "segmentation/video/flow, modules written by hand)")
    ap.add_argument("--hf", action="store_true",
                    help="only the Hugging Face transformers and diffusers models "
                    "(tests/hf_cases.py, tests/hf_wrappers.py)")
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
        more = [("written", n) for n in WRITTEN] + [(TV_MODULES[n], n) for n in TV_MORE] + \
            [("timm", n) for n in TIMM_MORE]
        every = more if args.more_only else [("torchvision", n) for n in torchvision_models()] \
            + [("timm", n) for n in TIMM] + more
        if args.hf:
            every = [("hf", name) for name in _hf_cases()]
        pending = [f"{s}:{n}" for s, n in every if (s, n) not in done]
        with open(args.markdown, "w") as fh:
            fh.write(markdown(list(done.values()), ways, pending))
        print("\n".join(totals(list(done.values()))))
        print(f"not run yet: {len(pending)} of {len(every)}")
        return 0
    jobs = []
    if args.hf:
        jobs += [("hf", name) for name in _hf_cases()]
    elif not args.timm_only and not args.more_only:
        jobs += [("torchvision", n) for n in torchvision_models()]
    if not args.torchvision_only and not args.more_only and not args.hf:
        jobs += [("timm", n) for n in TIMM]
    if (not args.timm_only and not args.torchvision_only or args.more_only) and not args.hf:
        jobs += [("written", n) for n in WRITTEN]
        jobs += [(TV_MODULES[n], n) for n in TV_MORE]
        jobs += [("timm", n) for n in TIMM_MORE]
    if args.only:
        jobs = [j for j in jobs if j[1] in args.only]
    done_rows = read_rows(args.rows) if args.rows else {}
    if not args.only:
        jobs = [j for j in jobs if j not in done_rows]
    # the largest models last, so the many small ones are in the table early
    jobs.sort(key=lambda j: any(b in j[1] for b in BIG))
    rows = []
    print(f"{'source':12} {'model':32} {'ok':3} {'nodes':>6} {'opaque':>6} {'compiled':>9} "
          f"{'python':>9} {'onnx':>9} {'train':>5} {'size 2':>9} {'import s':>8}  error",
          flush=True)
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
              f"{f(row.get('size2')):>9} "
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
