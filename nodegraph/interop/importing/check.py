"""The imported graph compiled with the module's weights, held to the module's outputs."""

from __future__ import annotations

import torch

from nodegraph.interop.importing.values import TOLERANCE, _leaves
from nodegraph.model.errors import NodegraphError


def _check(graph, weights, out_keys, placeholders, ids, inputs, reference) -> float:
    """Compile the graph with the module's weights and compare the outputs."""
    from nodegraph.interop.export.weights import load_weights as load
    from nodegraph.runtime.compile import compile_graph

    compiled = compile_graph(graph, device="cpu", for_training=False, referenced_weights=False)
    load(compiled, weights)
    compiled.module.eval()
    values = {(ids[p], "x"): x for p, x in zip(placeholders, inputs, strict=False)}
    with torch.no_grad():
        got = compiled.module.run(compiled.module.full_plan, values)
    expected = _leaves(reference, torch.Tensor)
    if len(expected) != len(out_keys):
        raise NodegraphError(f"the module returns {len(expected)} tensors, the graph "
                             f"{len(out_keys)}")
    worst = 0.0
    for key, want in zip(out_keys, expected, strict=True):
        have = got[key]
        if have.shape != want.shape:
            raise NodegraphError(f"the imported graph's output {key[0]} is "
                                 f"{tuple(have.shape)}, the module's {tuple(want.shape)}")
        worst = max(worst, float((have.double() - want.double()).abs().max()) if
                    want.numel() else 0.0)
    if worst > TOLERANCE:
        raise NodegraphError(f"the imported graph's outputs differ from the module's by "
                             f"{worst:.3g}")
    return worst
