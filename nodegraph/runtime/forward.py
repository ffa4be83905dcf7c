"""A graph's forward pass in one call: one batch in, every output the graph can compute out.

    outputs = nodegraph.forward(graph)                        # a batch from the data blocks
    outputs = nodegraph.forward(graph, {"data.x": x})         # your own tensors or arrays
    logits = outputs["out", "output"]

The graph is compiled for inference (no optimizer or loss needed) and run in eval mode
without gradients. Inputs replace outputs of the graph's nodes, usually its data block's
(`"data.x"` or `("data", "x")`); every block whose inputs are all known runs, the rest (a
loss without its target, say) is left out rather than failing. The editor's preview and
`nodegraph forward` on the command line run through here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph
from nodegraph.runtime import preprocess
from nodegraph.runtime.compile import Compiled, Key, compile_graph

SPLITS = ("train", "val", "test")


def forward(graph: Graph, inputs: Mapping[Any, Any] | None = None, split: str = "train",
            batch: int = 0, compiled: Compiled | None = None,
            nodes: set[str] | None = None, raw: bool = True) -> dict[Key, torch.Tensor]:
    """Run `graph` forward once and return every output it computed, keyed (node, port).

    `inputs` maps output ports ("node.port" or (node, port)) to tensors or arrays; without
    it, batch number `batch` of `split` comes from the graph's data blocks. `compiled` reuses
    a compiled graph (trained weights, say); `nodes` limits the run to what those nodes need.
    Inputs to a data block's port are `raw`, as its files hold them, and go through the
    model's preprocessing (`nodegraph.runtime.preprocess`): scaled as the block scales its
    own, and for images the deterministic part of the augment chain (Normalize, a centre
    crop); an image port also takes decoded photos as uint8 (N, H, W, C) at the block's
    size. raw=False takes them as the port holds them, already preprocessed.
    """
    compiled = compiled or compile_graph(graph, for_training=False)
    run_graph = compiled.exec_graph or compiled.graph
    wanted = run_graph.upstream(_members(compiled, nodes)) if nodes is not None else None
    values: dict[Key, Any] = (_given(compiled, inputs, raw) if inputs is not None
                              else _batch(compiled, split, batch, wanted, run_graph))
    module = compiled.module
    plan = tuple(step for step in module.full_plan if wanted is None or step[0] in wanted)
    runnable = _runnable(plan, set(values))
    was_training = module.training
    if was_training:  # an eval-mode copy (the editor's preview) skips two module walks
        module.eval()
    try:
        with torch.no_grad():
            module.run(runnable, values)
    finally:
        if was_training:
            module.train(True)
    return _on_user_nodes(compiled, values)


def _given(compiled: Compiled, inputs: Mapping[Any, Any], raw: bool = False
           ) -> dict[Key, Any]:
    """The caller's tensors, keyed by output port, on the graph's device and dtype; `raw`
    ones preprocessed first."""
    report, graph = compiled.report, compiled.exec_graph or compiled.graph
    steps = preprocess.preprocessors(compiled) if raw else {}
    values: dict[Key, Any] = {}
    for key, value in inputs.items():
        node, port = _key(key)
        if node not in graph:
            raise NodegraphError(f"input {node}.{port}: the graph has no node '{node}'")
        spec = report.specs.get(node)
        if spec is None or port not in {p.name for p in spec.outputs}:
            outs = ", ".join(p.name for p in spec.outputs) if spec else "none"
            raise NodegraphError(f"input {node}.{port}: '{node}' has no output port "
                                 f"'{port}' (its outputs: {outs}); give the output that "
                                 "feeds the input you mean, e.g. the data block's 'x'")
        value = preprocess.table_array(compiled, (node, port), value) if raw else value
        tensor = torch.as_tensor(np.asarray(value) if not isinstance(value, torch.Tensor)
                                 else value)
        step = steps.get((node, port))
        if step is not None and not step.empty:
            with torch.no_grad():
                tensor = step(tensor.cpu())
        expected = report.outputs.get((node, port))
        if expected is not None and tensor.is_floating_point() and expected.is_floating_point():
            tensor = tensor.to(expected.dtype)
        if expected is not None and tensor.ndim != expected.ndim:
            raise NodegraphError(f"input {node}.{port}: {tuple(tensor.shape)} has "
                                 f"{tensor.ndim} dims; the graph expects "
                                 f"{report.shape_text(node, port)}")
        values[(node, port)] = tensor.to(compiled.device)
    return values


def _key(key: Any) -> Key:
    if isinstance(key, tuple) and len(key) == 2:
        return str(key[0]), str(key[1])
    if isinstance(key, str) and "." in key:
        node, _, port = key.rpartition(".")
        return node, port
    raise NodegraphError(f"input {key!r}: name it 'node.port' or (node, port)")


def _batch(compiled: Compiled, split: str, index: int, wanted: set[str] | None,
           run_graph: Graph) -> dict[Key, Any]:
    """Batch `index` of `split` from every data block (of those in `wanted`, if given)."""
    if split not in SPLITS:
        raise NodegraphError(f"split '{split}': use one of {', '.join(SPLITS)}")
    if not compiled.datasets:
        raise NodegraphError("the graph has no data block: give the inputs as tensors, "
                             "e.g. forward(graph, {'data.x': x})")
    values: dict[Key, Any] = {}
    for node, ds in compiled.datasets.items():
        if wanted is not None and node not in wanted and node in run_graph:
            continue  # a data block the wanted nodes do not read
        name = split if ds.has(split) else next((s for s in SPLITS if ds.has(s)), None)
        if name is None:
            continue
        for i, part in enumerate(ds.batches(name)):
            if i == index:
                values.update({(node, k): v for k, v in part.items()})
                break
        else:
            raise NodegraphError(f"{node}: split '{name}' has fewer than {index + 1} batches")
    return values


def _members(compiled: Compiled, nodes: set[str]) -> list[str]:
    flat = compiled.report.flat
    return [m for n in nodes for m in ((flat.members(n) if flat else []) or [n])]


def _runnable(plan: tuple, known: set[Key]) -> tuple:
    """The steps whose inputs are all known, given what the earlier steps will make."""
    steps = []
    for step in plan:
        _, _, in_keys, out_keys = step
        if all(k is None or k in known for k in in_keys):
            steps.append(step)
            known.update(out_keys)
    return tuple(steps)


def _on_user_nodes(compiled: Compiled, values: dict[Key, Any]) -> dict[Key, torch.Tensor]:
    """Outputs keyed as the user's graph names them (a group instance's, not its insides')."""
    out = {k: v for k, v in values.items() if isinstance(v, torch.Tensor)}
    flat = compiled.report.flat
    if flat is not None:
        for user_key, flat_key in flat.outputs.items():
            if flat_key in out:
                out[user_key] = out[flat_key]
    return out
