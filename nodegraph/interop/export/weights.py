"""`nodegraph export --to weights`: trained weights as one safetensors file, keyed `node.param`.

The keys are the node ids of the graph (see `GraphModule.block_state`; a tied tensor is
written under each of its names), which are also the attribute names of the class `--to
python` writes, so the file loads into it with
``model.load_state_dict(safetensors.torch.load_file(path))``. The weights come from a file
(a checkpoint's ``last/model.safetensors`` or ``best.safetensors`` from ``nodegraph run
--checkpoint-dir``), checked against the graph, or from training the graph first.
"""

from __future__ import annotations

from pathlib import Path

import torch

from nodegraph.model.errors import NodegraphError
from nodegraph.model.graph import Graph
from nodegraph.runtime import checkpoint, normalization
from nodegraph.runtime.compile import Compiled, compile_graph


def read_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """A safetensors file of weights, or an error naming it and what is wrong with it."""
    return checkpoint.read_tensors(Path(path), "weights file", "pass a file written by "
                                   "`nodegraph export --to weights` or a checkpoint's "
                                   "last/model.safetensors")


def load_weights(compiled: Compiled, weights: dict[str, torch.Tensor],
                 source: str | Path | None = None) -> None:
    """Load `node.param` weights into a compiled graph, or say node by node what does not
    fit (a weight missing from `source`, one of another shape, one the graph lacks); the
    data blocks' normalisation saved beside them is put back on the data blocks."""
    weights, saved = normalization.split(weights)
    expected = compiled.module.block_state()  # a tied tensor may come under any of its names
    every = {k.removeprefix("blocks."): v for k, v in compiled.module.state_dict().items()}
    optional = compiled.module.computed_keys()  # older files lack computed buffers
    problems = [_where(k, "is missing from the file")
                for k in sorted(set(expected) - set(weights) - optional)]
    problems += [_where(k, f"is {_shape(weights[k])} in the file but {_shape(every[k])} in "
                        "the graph") for k in sorted(set(weights) & set(every))
                 if weights[k].shape != every[k].shape]
    nodes = set(compiled.exec_graph.nodes if compiled.exec_graph else compiled.graph.nodes)
    problems += [_where(k, "is not a weight of this node" if k.partition(".")[0] in nodes
                        else "names no node of this graph")
                 for k in sorted(set(weights) - set(every))]
    if problems:
        shown = "\n  ".join(problems[:12]) + (f"\n  ... and {len(problems) - 12} more"
                                              if len(problems) > 12 else "")
        what = f"the weights in '{source}'" if source else "the weights"
        raise NodegraphError(f"{what} do not fit this graph (keys are node.param):\n  {shown}")
    compiled.module.load_block_state(weights)
    normalization.apply(compiled, saved, source)


def _where(key: str, problem: str) -> str:
    node, _, param = key.partition(".")
    return f"node '{node}': {param or key} {problem}"


def _shape(t: torch.Tensor) -> str:
    return "(" + ", ".join(map(str, t.shape)) + ")"


def to_weights(graph: Graph, path: str | Path, weights: str | Path | None = None,
               train: bool = False) -> int:
    """Write the weights of `graph` to `path`: those of the file `weights` (checked to fit
    the graph), or, with `train`, those training the graph gives. Returns the tensor count."""
    if weights is not None:
        compiled = compile_graph(graph, device="cpu", for_training=False)
        load_weights(compiled, read_weights(weights), weights)
        module = compiled.module
    elif train:
        from nodegraph.runtime.train import train as run

        module = run(graph).unless_cancelled().module
    else:
        raise NodegraphError("exporting weights needs trained ones: pass --weights FILE (a "
                             "checkpoint's last/model.safetensors from nodegraph run "
                             "--checkpoint-dir) or --train")
    # every name of a tied tensor, as the exported class's strict load_state_dict wants
    state = {k.removeprefix("blocks."): v.detach().clone() for k, v in
             module.state_dict().items()}  # not the data's normalisation: weights only
    checkpoint.save_weights(Path(path), state)
    return len(state)
