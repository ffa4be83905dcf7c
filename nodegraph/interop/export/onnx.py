"""`nodegraph export --to onnx`: the forward graph in inference mode, as an ONNX model.

The compiled graph is traced in eval mode (dropout off, batch norm on its running
statistics) from the data ports to the chosen outputs — by default the heads of the
prediction part, the values losses and metrics read (see `export.model.partition`). Inputs
are named after the data ports (``x``), outputs after their nodes (``out``, or
``node.port`` for blocks with several outputs); the batch dimension stays free.

By default the file starts from raw inputs: the model's preprocessing
(`nodegraph.runtime.preprocess`) is inside the graph. An image block's port takes decoded
8-bit photos at the block's size, uint8 N x H x W x C (grey or RGB as the block reads them),
and scales them to [0, 1], then runs the deterministic part of the augment chain
(Normalize, a centre crop; a resize, which torch's exporter cannot write with torchvision's
antialiasing, as the linear map it is at that size); any port the block normalises takes
raw values and is scaled with the block's statistics. ``preprocess=False``
(``--no-preprocess``) writes the bare network, whose inputs are the ports' values. Either
way each input's contract — dtype, layout, value range, size, channel order, resize
policy, class names; for a table its columns in order and the codes of its text columns
(``Model.table_rows`` makes the array from a DataFrame) — is written in the file's
``metadata_props`` (``input.x.dtype``, ``input.x.layout``, ..., ``input.x.columns``,
``input.x.categories``, ``classes``).

When the exporter fails, each block on the way is exported on its own to find the ones
that cannot be written, so the error names nodes instead of showing a traceback. After
writing, onnxruntime (when installed) runs the file on the first rows of the training data
and its outputs are compared with the compiled graph's.
"""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from nodegraph.interop.export.model import executed, partition, sample_inputs, unexportable
from nodegraph.interop.export.weights import load_weights
from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph
from nodegraph.runtime.compile import Compiled, Key, compile_graph
from nodegraph.runtime.preprocess import Preprocess, contract, preprocessors, raw_example

OPSET = 17
MIN_OPSET, MAX_OPSET = 9, 20  # what torch's TorchScript exporter writes
TOLERANCE = 1e-4  # relative: of the largest output value, at least 1


@dataclass
class OnnxExport:
    """What `to_onnx` wrote, and how closely onnxruntime agrees with the graph."""

    path: Path
    inputs: list[str]
    outputs: list[str]
    max_difference: float | None = None  # None when onnxruntime is not installed
    opset: int = OPSET  # the opset written: OPSET, or the first one holding every op
    random: bool = False  # the outputs depend on random draws, so they were not compared
    # per input name, what it must hold (dtype, layout, range, ...; `preprocess.contract`)
    contract: dict[str, dict[str, str]] = field(default_factory=dict)


class _Forward(nn.Module):
    """The compiled graph as a module of positional inputs and a tuple of outputs, each
    input through its preprocessing first (`preprocess`: one per input, None for none)."""

    def __init__(self, compiled: Compiled, inputs: list[Key], outputs: list[Key],
                 preprocess: list[Preprocess | None] | None = None):
        super().__init__()
        self.graph = compiled.module
        self.inputs, self.outputs = inputs, outputs
        self.steps = compiled.module.plan(executed(compiled).upstream([k[0] for k in outputs]))
        self.preprocess = list(preprocess or [None] * len(inputs))  # (no weights: a list)

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        tensors = tuple(t if p is None else p(t)
                        for p, t in zip(self.preprocess, tensors, strict=True))
        values = self.graph.run(self.steps, dict(zip(self.inputs, tensors, strict=True)))
        return tuple(values[k] for k in self.outputs)


def to_onnx(graph: Graph, path: str | Path, outputs: list[str] | None = None,
            weights: dict[str, torch.Tensor] | None = None,
            opset: int | None = None, preprocess: bool = True) -> OnnxExport:
    """Write the forward graph of `graph` to `path`; `outputs` names node or node.port
    values (default: the prediction heads; for an imported graph, every output of the
    module, as the file lists them); `weights` (node.param) replace the initial
    weights, and normalisation entries among them the data blocks' statistics; `opset` is
    the ONNX opset version (default: OPSET, or the first later one that holds every op the
    graph uses, as `F.fold`'s col2im needs 18; an explicit one that cannot hold an op is an
    error naming the op and the opset that can). With `preprocess` (the default) the file
    starts from raw inputs (see the module doc); without, from the network's own inputs.
    Either way the input contract is written in the file's metadata. Raises ExportError
    naming the blocks ONNX cannot hold. The batch dim of every input is dynamic; in a
    graph made by `nodegraph import`, every dim of its inputs is, but those it records as
    fixed; where the file then fails at doubled sizes, its inputs are given the example's
    sizes but the batch (`_pin`)."""
    chosen = opset
    opset = OPSET if opset is None else opset
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise NodegraphError(f"--opset {opset}: use {MIN_OPSET} to {MAX_OPSET}")
    path = Path(path)
    compiled = compile_graph(graph, device="cpu", for_training=False)
    if weights is not None:
        load_weights(compiled, weights)
    _refuse_bfloat16(compiled)
    compiled.module.eval()
    imported = graph.extra.get("imported") if isinstance(graph.extra, dict) else None
    if not outputs and isinstance(imported, dict) and isinstance(imported.get("outputs"), list):
        # every output of the module still in the graph (a head replaced in the editor
        # is gone; the new one is among the prediction heads)
        kept = [str(o) for o in imported["outputs"]
                if str(o).split(".")[0] in compiled.report.specs]
        heads = [f"{n}.{p}" for n, p in partition(compiled).heads]
        outputs = kept if len(kept) == len(imported["outputs"]) else [
            *kept, *(h for h in heads if h not in kept)]
    keys = _outputs(compiled, outputs)
    graph = executed(compiled)
    needed = graph.upstream([k[0] for k in keys])
    inputs = [(d, p) for d, ds in compiled.datasets.items() for p in ds.ports
              if any(e.src == d and e.src_port == p and e.dst in needed
                     for e in graph.edges)]
    for node, _ in keys:
        if not set(compiled.datasets) & graph.upstream([node]):
            raise unexportable({node: "its output does not depend on any data input, and an "
                                "ONNX output must (a fixed tensor belongs inside the model)"})
    sample = sample_inputs(compiled)
    steps = preprocessors(compiled, inputs) if preprocess else {}
    before = [steps[k] if k in steps and not steps[k].empty else None for k in inputs]
    example = tuple(sample[k] if p is None else raw_example(sample[k], p)
                    for k, p in zip(inputs, before, strict=True))
    before = [p if p is None else _traceable(p, raw, opset)
              for p, raw in zip(before, example, strict=True)]
    in_names = _input_names(inputs)
    out_names = [_output_name(compiled, k) for k in keys]
    module = _Forward(compiled, inputs, keys, before).eval()  # torch.onnx.export leaves a module in
    # the mode its top was in: a _Forward left training would put the graph's batch norms
    # back into training for every run after the first export
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        expected = module(*example)
        torch.manual_seed(1)
        random = not all(torch.equal(a, b) for a, b in zip(expected, module(*example),
                                                            strict=True))
    batch = example[0].shape[0] if example else None
    dynamic = {n: {0: "batch"} for n, t in zip(in_names, example, strict=True)}
    dynamic.update({n: {0: "batch"} for n, t in zip(out_names, expected, strict=True)
                    if batch is not None and t.ndim and t.shape[0] == batch})
    sized = {k: dict(v) for k, v in dynamic.items()}
    if isinstance(imported, dict):  # sizes the import follows (see importing.probing)
        fixed = imported.get("fixed_sizes") or {}
        for name, (node, _), t in zip(in_names, inputs, example, strict=True):
            kept = fixed.get(node, {}) if isinstance(fixed, dict) else {}
            sized[name].update({d: f"{name}_{d}" for d in range(1, t.ndim)
                                if str(d) not in kept})
    result = OnnxExport(path, in_names, out_names, random=random)
    # within 1e-4 of the outputs, or of the graph's own float32 rounding where that is more
    # (visformer's random attention logits reach 3e4: float32 itself is 5e-3 off there)
    allowed, noise = TOLERANCE * _scale(expected), None
    for axes in ([sized, dynamic] if sized != dynamic else [dynamic]):
        # with every size dynamic first; where an op has no form for an unknown size
        # (adaptive pooling to 7x7) or its numbers drift, at the example's sizes with the
        # batch dynamic, as before
        last = axes is dynamic
        try:
            opset = _export_at(module, example, path, in_names, out_names, axes, opset,
                               chosen is None)
        except NodegraphError:
            raise  # an explicit opset that cannot hold an op: says which can
        except Exception as e:
            if last:
                raise _locate(compiled, module.steps, sample, e, opset) from None
            continue
        result.opset = opset
        if not random:  # sampling blocks draw other numbers in onnxruntime
            result.max_difference = _check(path, in_names, example, expected)
            if result.max_difference is not None and result.max_difference > allowed and \
                    noise is None:
                noise = _rounding(module, example, expected)
                allowed = max(allowed, noise)
        if last or result.max_difference is None or result.max_difference <= allowed:
            if not last and not random and not _follows(path, module, in_names, example,
                                                        axes):
                _pin(path, in_names, example)  # right at the example's sizes only: says so
            break
    if result.max_difference is not None and result.max_difference > allowed:
        raise NodegraphError(f"onnxruntime's outputs differ from the graph's by "
                             f"{result.max_difference:.3g} on the training data's first rows "
                             f"(outputs reach {_scale(expected):.3g}; the graph's own "
                             f"float32 rounding {noise or 0:.3g})")
    result.contract = {name: contract(compiled, key, steps.get(key) if preprocess else None)
                       for name, key in zip(in_names, inputs, strict=True)}
    _describe(path, result.contract, preprocess)
    return result


def _traceable(step: Preprocess, raw: torch.Tensor, opset: int) -> Preprocess:
    """An input's preprocessing as ONNX can hold it: as it is, or with each image step the
    exporter cannot trace (a resize with antialiasing, which neither torch's exporter nor
    onnxruntime computes as torchvision does) written as the separable linear map it is
    at this size (`_separable`). A step that is neither is refused by name."""
    try:
        _export(step.eval(), (raw,), io.BytesIO(), ["x"], None, {"x": {0: "batch"}}, opset)
        return step
    except Exception as e:
        error = e
    image, node = step.image, step.key[0]
    if image is None or not image.steps:
        raise unexportable({node: f"its preprocessing cannot be written in ONNX: "
                            f"{_first_line(error)}"}, "export with --no-preprocess "
                           "(preprocess=False)") from None
    x = raw[:1].permute(0, 3, 1, 2).to(torch.float32) / 255.0  # (uint8 photos)
    steps = []
    for fn, text in zip(image.steps, image.script or [None] * len(image.steps), strict=False):
        try:
            _export(_Step(fn).eval(), (x,), io.BytesIO(), None, None, None, opset)
            steps.append(fn)
        except Exception as e:
            linear = _separable(fn, tuple(x.shape[1:]))
            if linear is None:
                raise unexportable({node: f"the augment step {text or fn} wired into it has "
                                    f"no faithful ONNX form ({_first_line(e, 120)})"},
                                   "export with --no-preprocess (preprocess=False): the "
                                   "bare network, whose input is the block's values after "
                                   "the chain's val/test part, as the file's metadata "
                                   "says; Model.predict and the Python export apply the "
                                   "step themselves") from None
            steps.append(linear)
        with torch.no_grad():
            x = fn(x)
    return step.with_steps(tuple(steps))


class _Step(nn.Module):
    """One preprocessing step as a module, to export it alone."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


class _Linear(nn.Module):
    """x -> rows @ x @ cols.T on the last two dims: a resize or crop at a fixed size."""

    def __init__(self, rows: torch.Tensor, cols: torch.Tensor):
        super().__init__()
        self.rows, self.cols = rows, cols

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rows.to(x.dtype) @ x @ self.cols.to(x.dtype).T


def _separable(fn, shape: tuple[int, ...]) -> _Linear | None:
    """`fn` on images shaped `shape` (C, H, W) as a separable linear map — found from
    its outputs on images of one lit row or column, and used only when it gives fn's own
    outputs on random images to 1e-6 — or None."""
    c, h, w = shape
    with torch.no_grad():
        lit_rows = torch.zeros(h, c, h, w)
        lit_rows[torch.arange(h), :, torch.arange(h), :] = 1.0
        lit_cols = torch.zeros(w, c, h, w)
        lit_cols[torch.arange(w), :, :, torch.arange(w)] = 1.0
        try:
            rows, cols = fn(lit_rows)[:, 0, :, 0].T, fn(lit_cols)[:, 0, 0, :].T
            probe = torch.rand(4, c, h, w, generator=torch.Generator().manual_seed(0))
            linear = _Linear(rows.contiguous(), cols.contiguous())
            if torch.allclose(linear(probe), fn(probe), atol=1e-6, rtol=0):
                return linear
        except Exception:  # not an image map at all
            return None
    return None


def _describe(path: Path, contracts: dict[str, dict[str, str]], preprocess: bool) -> None:
    """Write each input's contract in the file's metadata_props (``input.x.dtype``,
    ``input.x.layout``, ...; ``classes``) and a one-paragraph doc_string."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)  # (big weights stay beside it)
    props = {"nodegraph.preprocess": "inside" if preprocess else "none (bare network)"}
    for name, fields in contracts.items():
        for entry, text in fields.items():
            if entry == "classes":
                props["classes"] = text
            else:
                props[f"input.{name}.{entry}"] = text
    onnx.helper.set_model_props(model, props)
    model.doc_string = "Exported by nodegraph. Inputs: " + "; ".join(
        f"{name}: {f.get('dtype')} {f.get('layout')}, {f.get('range')}"
        for name, f in contracts.items()) + "."
    onnx.save(model, str(path))


def _refuse_bfloat16(compiled: Compiled) -> None:
    """bfloat16 weights or data cannot be checked here: onnxruntime runs few bfloat16
    operators on the CPU, so the file could not be held to the graph."""
    tensors = {nid: [*ds.tensors(next(s for s in ("train", "val", "test") if ds.has(s)))
                     .values()] for nid, ds in compiled.datasets.items()}
    tensors.update({nid: [*m.parameters(), *m.buffers()]
                    for nid, m in compiled.module.blocks.items()})
    bad: dict[str | None, str] = {
        nid: "it computes in bfloat16, which the ONNX export cannot carry (onnxruntime runs "
        "few bfloat16 operators on the CPU, so the file cannot be checked)"
        for nid, ts in tensors.items() if any(t.dtype == torch.bfloat16 for t in ts)}
    if bad:
        raise unexportable(bad, "set its dtype (or training.dtype) to float32 or float64 "
                           "for the export; the trained weights load into either")


def _scale(outputs: tuple) -> float:
    """What the tolerance is relative to: the largest output value, at least 1."""
    return max([1.0, *(float(t.detach().abs().max()) for t in outputs
                       if t.numel() and t.is_floating_point())])


def _outputs(compiled: Compiled, names: list[str] | None) -> list[Key]:
    if not names:
        heads = partition(compiled).heads
        if not heads:
            raise NodegraphError("the graph has no outputs to export; name some with "
                                 "--outputs NODE[.PORT]")
        return heads
    keys = []
    for name in names:
        node, _, port = name.partition(".")
        spec = compiled.report.specs.get(node)
        if spec is None or spec.kind != "op":
            raise NodegraphError(f"--outputs {name}: no op block '{node}' in the graph")
        ports = [p.name for p in spec.outputs]
        if not port and len(ports) != 1:
            raise NodegraphError(f"--outputs {name}: '{node}' has several outputs; name one "
                                 f"({', '.join(f'{node}.{p}' for p in ports)})")
        if port and port not in ports:
            raise NodegraphError(f"--outputs {name}: '{node}' has no output '{port}' "
                                 f"(outputs: {', '.join(ports)})")
        keys.append((node, port or ports[0]))
    return keys


def _input_names(inputs: list[Key]) -> list[str]:
    ports = [p for _, p in inputs]
    return [p if ports.count(p) == 1 else f"{d}.{p}" for d, p in inputs]


def _output_name(compiled: Compiled, key: Key) -> str:
    single = len(compiled.report.specs[key[0]].outputs) == 1
    return key[0] if single else f"{key[0]}.{key[1]}"


def _export_at(module: nn.Module, example: tuple, path, in_names, out_names, dynamic,
               opset: int, auto: bool) -> int:
    """Export at `opset`, or (`auto`) at the version the exporter says an op it cannot
    write at `opset` was added in (`aten::col2im`: 18), as long as that is at most
    MAX_OPSET; returns the opset written. An explicit opset that cannot hold an op is
    an error that says which opset can."""
    while True:
        try:
            _export(module, example, path, in_names, out_names, dynamic, opset)
            return opset
        except torch.onnx.errors.UnsupportedOperatorError as e:
            needed = _needed_opset(e)
            if needed is None or needed <= opset or needed > MAX_OPSET:
                raise
            if not auto:
                op = re.search(r"operator '([^']+)'", str(e))
                raise NodegraphError(
                    f"{op.group(1) if op else 'an operator'} needs ONNX opset {needed}; "
                    f"export with --opset {needed} (opset={needed}), or leave the opset "
                    "out to have it chosen") from None
            opset = needed


def _needed_opset(error: Exception) -> int | None:
    """The opset torch's exporter says an operator was added in, if it says."""
    found = re.search(r"added in version (\d+)", str(error))
    return int(found.group(1)) if found else None


def _export(module: nn.Module, example: tuple, path, in_names, out_names, dynamic,
            opset: int = 17) -> None:
    # quiet: the exporter warns that it is deprecated and prints its IR when it fails
    # and without torch's fused inference kernels (TransformerEncoderLayer's fast path under
    # no_grad), which have no ONNX form
    fastpath = torch.backends.mha.get_fastpath_enabled()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()), _fastpath_off(fastpath), _quiet_fds():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, example, str(path) if not isinstance(path, io.BytesIO)
                          else path,  # type: ignore[arg-type]  # it writes to a BytesIO too
                          input_names=in_names, output_names=out_names,
                          dynamic_axes=dynamic, opset_version=opset, dynamo=False)


@contextlib.contextmanager
def _quiet_fds():
    """Silence what torch's C++ side prints (its IR when export fails) on fds 1 and 2."""
    import os
    import sys
    import tempfile

    try:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        saved = [os.dup(1), os.dup(2)]
    except (OSError, ValueError, AttributeError):
        yield  # no real file descriptors (an embedding host): nothing to silence
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


@contextlib.contextmanager
def _fastpath_off(previous: bool):
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(previous)


def _locate(compiled: Compiled, steps, sample: dict, error: Exception,
            opset: int = OPSET) -> Exception:
    """Export block by block (at `opset`) to find which ones the exporter refuses."""
    values = dict(sample)
    problems: dict[str | None, str] = {}
    with torch.no_grad():
        for nid, module, in_keys, out_keys in steps:
            args = tuple(values.get(k) for k in in_keys)
            if all(a is not None for a in args):
                try:
                    _export(module, args, io.BytesIO(), None, None, None, opset)
                except Exception as e:
                    problems[nid] = f"ONNX cannot hold it: {_first_line(e)}"
            out = module(*args)
            values.update(zip(out_keys, (out,) if len(out_keys) == 1 else out, strict=True))
    if not problems:
        problems[None] = f"the ONNX exporter failed: {_first_line(error)}"
    return unexportable(problems, "export to Python instead (--to python), or replace it")


def _first_line(e: Exception, limit: int = 200) -> str:
    """The exception in one line: torch's messages spread tensors over several."""
    text = " ".join(str(e).split())
    text = text if len(text) <= limit else text[:limit - 3] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _follows(path: Path, module: nn.Module, names: list[str], example: tuple,
             axes: dict) -> bool:
    """Whether the file written with the sizes in `axes` dynamic still gives the graph's
    numbers with those sizes doubled (the example tiled along them, dims of equal size
    together, as `importing.probing.probe` does): a size an opaque block computes in Python is a
    constant of the trace (efficientvit's attention biases, mobilevit's patch reshape),
    which only another size shows. Sizes the graph itself refuses prove nothing."""
    groups: dict[int, list[tuple[int, int]]] = {}
    for i, (name, t) in enumerate(zip(names, example, strict=True)):
        for dim in axes.get(name, {}):
            if dim:
                groups.setdefault(int(t.shape[dim]), []).append((i, dim))
    for dims in groups.values():
        doubled = list(example)
        for i, dim in dims:
            doubled[i] = torch.cat([doubled[i], doubled[i]], dim=dim)
        try:
            with torch.no_grad():
                expected = module(*doubled)
        except Exception:  # the graph refuses those sizes (a guard, channels)
            continue
        try:
            difference = _check(path, names, tuple(doubled), expected)
        except Exception:  # onnxruntime fails there: a size traced as a constant
            return False
        if difference is not None and difference > TOLERANCE * _scale(expected):
            return False
    return True


def _rounding(module: nn.Module, example: tuple, expected: tuple) -> float:
    """How far the graph's float32 outputs are from the same graph computed in float64 on
    the same inputs: the rounding of float32 itself, which no other implementation of
    the graph (onnxruntime orders its sums otherwise) can be asked to beat. 0 where the
    graph does not run in float64."""
    import copy

    try:
        wide = copy.deepcopy(module).double()
        with torch.no_grad():
            exact = wide(*(t.double() if t.is_floating_point() else t for t in example))
    except Exception:
        return 0.0
    return max((float((e.double() - x.double()).abs().max()) for e, x in zip(
        expected, exact, strict=True) if e.numel() and e.is_floating_point()), default=0.0)


def _pin(path: Path, names: list[str], example: tuple) -> None:
    """Give the file's inputs the example's sizes but the batch, so onnxruntime refuses
    other sizes by name ("Got invalid dimensions for input: x") instead of failing inside
    or computing wrong numbers. The file keeps the ops traced with every size dynamic,
    which gave the graph's numbers where the batch-only trace may not (mobilevit)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)  # (big weights stay beside it)
    for entry in model.graph.input:
        if entry.name not in names:
            continue
        shape = example[names.index(entry.name)].shape
        for d, dim in enumerate(entry.type.tensor_type.shape.dim):
            if d:
                dim.dim_value = int(shape[d])  # (replaces the dim's symbolic name)
    onnx.save(model, str(path))


def _check(path: Path, names: list[str], example: tuple, expected: tuple) -> float | None:
    """The largest difference between onnxruntime's outputs and the graph's."""
    try:
        import onnxruntime
    except ImportError:
        return None
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {n: t.numpy() for n, t in zip(names, example, strict=True)})
    diffs = [float((torch.as_tensor(g).double() - e.detach().double()).abs().max())
             if e.numel() else 0.0 for g, e in zip(got, expected, strict=True)]
    return max(diffs, default=0.0)
