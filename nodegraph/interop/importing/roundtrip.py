"""The whole round trip of an imported module, held to the module itself.

`round_trip` imports a module and then checks every way out of the graph against the
module's own outputs on the same inputs: the compiled graph with the imported weights,
the Python export (its class with the weights loaded), the ONNX export run by
onnxruntime, and one training step of the compiled graph (every weight gets a gradient).
The tests of `nodegraph import` and `benchmarks/import_models.py` share it. A graph with
heads only training computes (googlenet's aux logits) has them as outputs after the
module's eval outputs; the eval outputs are compared, the training step trains them all.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


@dataclass
class RoundTrip:
    """Relative differences to the module's outputs, by way out (None: not run)."""

    nodes: int = 0
    opaque: int = 0
    import_s: float = 0.0
    compiled: float | None = None
    python: float | None = None
    onnx: float | None = None
    trained: bool | None = None
    shape_ok: bool | None = None
    resized: float | None = None  # compiled graph vs module at the other input sizes
    resized_onnx: float | None = None  # the ONNX export vs module there
    fixed_sizes: dict = field(default_factory=dict)  # what the import is valid for only
    errors: dict[str, str] = field(default_factory=dict)


def relative(have: torch.Tensor, want: torch.Tensor) -> float:
    """max |have − want| / max(1, max |want|): the difference in units of the output."""
    have, want = have.detach().double(), want.detach().double()
    if not want.numel():
        return 0.0
    return float((have - want).abs().max() / max(1.0, float(want.abs().max())))


def outputs_of(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = [getattr(value, f.name) for f in dataclasses.fields(value)]
    items = value.values() if isinstance(value, dict) else value if isinstance(
        value, tuple | list) else ()
    return [t for v in items for t in outputs_of(v)]


def round_trip(module: Any, inputs: tuple, folder: str | Path, kwargs: dict | None = None,
               ways: tuple[str, ...] = ("validate", "python", "onnx", "train"),
               others: tuple = (), **options: Any) -> RoundTrip:
    """Import `module` (what `import_graph` takes) on `inputs` into `folder`, then check
    each of `ways`; a failure is recorded by way, not raised. `others` are inputs of other
    sizes: the compiled graph must give the module's numbers there too, or refuse the
    size with a message (way "resized")."""
    from nodegraph.interop.importing.build import import_graph
    from nodegraph.model.groups import flatten, has_groups

    folder = Path(folder)
    result = RoundTrip()
    start = time.perf_counter()
    imported = import_graph(module, inputs, folder / "model.json", kwargs, **options)
    result.import_s = time.perf_counter() - start
    graph = imported.graph
    flat = flatten(graph).graph if has_groups(graph) else graph  # every node, groups opened
    result.nodes = len(flat)
    result.opaque = sum(n.type in ("opaque.Module", "opaque.Function") for n in flat)
    result.compiled = imported.max_difference
    reference = [t.detach() for t in imported.reference]
    result.fixed_sizes = imported.fixed_sizes
    checks = {"validate": _validate, "python": _python, "onnx": _onnx, "train": _train,
              "resized": _resized}
    for way in (*ways, *(("resized",) if others else ())):
        try:
            checks[way](imported, others if way == "resized" else inputs, reference, folder,
                        result)
        except Exception as e:  # recorded by way: the caller decides what fails
            result.errors[way] = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    return result


def _validate(imported, inputs, reference, folder, result) -> None:
    from nodegraph.check.validate import validate

    report = validate(imported.graph)
    if not report.ok:
        raise AssertionError("; ".join(str(p) for p in report.problems[:3]))
    shapes = [tuple(report.outputs[key].shape) for key in imported.outputs[:len(reference)]]
    result.shape_ok = shapes == [tuple(t.shape) for t in reference]
    if not result.shape_ok:
        raise AssertionError(f"validation infers {shapes}, the module gives "
                             f"{[tuple(t.shape) for t in reference]}")


def _python(imported, inputs, reference, folder, result) -> None:
    from nodegraph.interop.export import to_python

    exported = to_python(imported.graph, folder / "model_export.py")
    namespace: dict[str, Any] = {"__name__": "exported"}
    exec(compile(exported.path.read_text(), str(exported.path), "exec"), namespace)
    model: Any = namespace[exported.class_name]()  # the exported class (has `losses`)
    model.load_state_dict(imported.weights, strict=False)
    model.eval()
    with torch.no_grad():  # `losses` names each output: `forward` returns them in run order
        _, named = model.losses(*inputs)
    got = [named.get(n, named.get(f"{n}.{p}")) for n, p in imported.outputs]
    result.python = max(relative(h, w) for h, w in zip(got[:len(reference)], reference,
                                                         strict=True))


def _onnx(imported, inputs, reference, folder, result) -> None:
    import onnxruntime

    from nodegraph.interop.export import to_onnx

    exported = to_onnx(imported.graph, folder / "model.onnx",
                       outputs=[f"{n}.{p}" for n, p in imported.outputs],
                       weights=imported.weights)
    session = onnxruntime.InferenceSession(str(exported.path),
                                           providers=["CPUExecutionProvider"])
    got = session.run(None, {n: x.numpy() for n, x in zip(exported.inputs, inputs,
                                                           strict=True)})
    result.onnx = max(relative(torch.as_tensor(h), w) for h, w in zip(got[:len(reference)],
                                                                      reference, strict=True))


def _resized(imported, others, reference, folder, result) -> None:
    """The compiled graph at each of `others` (inputs of other sizes) against the module
    there; a size the import refuses must be refused by its size guard, naming it
    (recorded in `errors` as "refused: ..."), never computed wrong. Where the module
    computes those sizes, a node of the graph failing there (a size held constant that
    follows the input) is a failure, not a refusal; where the module refuses them too,
    any error of the graph is one."""
    from nodegraph.interop.export.weights import load_weights
    from nodegraph.interop.importing.guards import refuses_size
    from nodegraph.model.errors import NodegraphError
    from nodegraph.runtime.compile import compile_graph

    compiled = compile_graph(imported.graph, device="cpu", for_training=False)
    load_weights(compiled, imported.weights)
    compiled.module.eval()
    worst = 0.0
    for inputs in others:
        with torch.no_grad():
            try:
                want = outputs_of(imported.module(*inputs))
            except Exception as e:  # the module refuses these sizes: so must the graph
                want, refusal = None, f"{type(e).__name__}: {e}"
            values = {(p, "x"): x for p, x in zip(imported.placeholders, inputs, strict=True)}
            try:
                got = compiled.module.run(compiled.module.full_plan, values)
            except NodegraphError as e:
                message = " ".join(str(e).split())
                if want is not None and not refuses_size(e):  # a node failing is no refusal
                    raise AssertionError(
                        f"the module computes inputs {[tuple(x.shape) for x in inputs]} and "
                        f"the graph fails there without refusing their size: {message[:300]}"
                    ) from None
                if want is None and not refuses_size(e):  # no guard's: the module's refusal
                    too = " ".join(refusal.split())[:150]
                    message = f"the module refuses these sizes too ({too}); {message}"
                result.errors["resized"] = f"refused: {message[:300]}"
                continue
            if want is None:
                raise AssertionError(f"the module refuses inputs {[tuple(x.shape) for x in inputs]}"
                                     f" ({refusal[:200]}) and the graph computes them")
        have = [got[key] for key in imported.outputs[:len(want)]]
        worst = max([worst, *(relative(h, w) if h.shape == w.shape else float("inf")
                              for h, w in zip(have, want, strict=True))])
        onnx = folder / "model.onnx"
        if onnx.exists():  # the ONNX file follows the sizes the graph follows, or names the
            # sizes it takes in its inputs' shapes (an op with no form for another size)
            import onnxruntime

            session = onnxruntime.InferenceSession(str(onnx),
                                                   providers=["CPUExecutionProvider"])
            names = [i.name for i in session.get_inputs()]
            if any(isinstance(d, int) and d != x.shape[k] for i, x in zip(
                    session.get_inputs(), inputs, strict=True) for k, d in enumerate(i.shape)):
                continue  # written for the example's sizes (its input shapes say which)
            ran = session.run(None, {n: x.numpy() for n, x in zip(names, inputs,
                                                                  strict=True)})
            result.resized_onnx = max([result.resized_onnx or 0.0, *(
                relative(torch.as_tensor(h), w) if tuple(h.shape) == tuple(w.shape)
                else float("inf") for h, w in zip(ran[:len(want)], want, strict=True))])
    result.resized = worst


def _without_gradient(module: Any, inputs: tuple) -> int:
    """How many of the module's weights the same loss gives no finite gradient (the
    module's own gradients are cleared after; run in eval mode, so its batch norms'
    running statistics stay as the graph's weights have them)."""
    if not isinstance(module, torch.nn.Module):
        return 0
    from nodegraph.interop.importing.values import _leaves

    params = [p for p in module.parameters() if p.requires_grad]
    was_training = module.training
    module.eval()
    try:
        outputs = _leaves(module(*inputs), torch.Tensor)
        loss = sum((o.float() - 1).pow(2).mean() for o in outputs if o.is_floating_point())
        if isinstance(loss, torch.Tensor) and loss.requires_grad:
            loss.backward()
        return sum(p.grad is None or not bool(torch.isfinite(p.grad).all()) for p in params)
    finally:
        module.train(was_training)
        for p in params:
            p.grad = None


def _train(imported, inputs, reference, folder, result) -> None:
    """One SGD step on the squared distance of the outputs from 1 (a head that starts at
    zero still passes gradients back): every weight gets a finite gradient, but as many
    as the module itself leaves without one (a frozen backbone run under `no_grad`, a
    pooler whose output is not used)."""
    from nodegraph.interop.export.weights import load_weights
    from nodegraph.runtime.compile import compile_graph

    compiled = compile_graph(imported.graph, device="cpu", for_training=False)
    load_weights(compiled, imported.weights)
    compiled.module.train()
    values = {(p, "x"): x for p, x in zip(imported.placeholders, inputs, strict=True)}
    params = [p for p in compiled.module.parameters() if p.requires_grad]
    got = compiled.module.run(compiled.module.full_plan, values)
    loss = sum((got[key].float() - 1).pow(2).mean() for key in imported.outputs)
    loss.backward()
    missing = [i for i, p in enumerate(params) if p.grad is None or
               not torch.isfinite(p.grad).all()]
    if len(missing) > _without_gradient(imported.module, inputs):
        raise AssertionError(f"{len(missing)} of {len(params)} weights got no finite gradient")
    before = [p.detach().clone() for p in params]
    torch.optim.SGD(params, lr=1e-3).step()
    result.trained = any(not torch.equal(b, p) for b, p in zip(before, params, strict=True))
