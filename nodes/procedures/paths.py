"""Regularisation paths: a model's weights as one regularisation strength sweeps a grid.

The ridge path w(λ) shows every weight shrinking smoothly
towards 0 as λ grows, while the lasso's weights reach exactly 0 one after another. This
procedure retrains the graph once per value of one optimizer param (the LeastSquares
`ridge`, the ProximalGD `l1`, any optimizer's `weight_decay`) and yields per value the
model node's weights and bias and the final loss on each split — the editor plots the
path, `nodegraph sample` prints it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nodegraph.kinds.declare import procedure
from nodegraph.kinds.procedure_context import Procedure, ProcedureContext
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import (
    Param,
    Params,
    int_param,
    str_param,
)


class RegularizationPathParams(Params):
    model: str
    optimizer: str
    param: str
    values: list[float]  # type: ignore[assignment]  # the param, not dict.values
    epochs: int | None


class RegularizationPath(Procedure):
    """One training run per value; the model's weights after each."""

    def __init__(self, p: RegularizationPathParams):
        self.p = p

    def run(self, ctx: ProcedureContext) -> Iterator[dict[str, Any]]:
        p, graph = self.p, ctx.compiled.graph
        for node, what in ((p.model, "model"), (p.optimizer, "optimizer")):
            if node not in graph.nodes:
                raise NodegraphError(f"its {what} '{node}' is not a node of the graph")
        spec = graph.registry.get(graph.nodes[p.optimizer].type)
        if spec.kind != "optimizer" or spec.param(p.param) is None:
            raise NodegraphError(f"'{p.optimizer}' is not an optimizer with a param "
                                 f"'{p.param}' to sweep")
        for value in p.values:
            g = graph.copy()
            g.set_param(p.optimizer, p.param, value)
            # the context compiles and trains each copy: a block never reaches the trainer
            compiled = ctx.compile(ctx.training.seed, graph=g)
            final = ctx.run_training(compiled, epochs=p.epochs)
            module = compiled.module.module_of(p.model)
            weight = getattr(module, "weight", None)
            if weight is None:
                raise NodegraphError(f"'{p.model}' has no weight to follow")
            bias = getattr(module, "bias", None)
            yield {"value": value,
                   "weights": weight.detach().double().cpu().reshape(-1).tolist(),
                   "bias": [] if bias is None else bias.detach().double().cpu().tolist(),
                   **{f"{split}_loss": numbers.get("loss")
                      for split, numbers in final.items()}}


BLOCKS = [
    procedure("procedures.RegularizationPath",
              "The regularisation path: retrain once per value of a penalty, follow the weights."
              "\n\nSweeps the optimizer param `param` (LeastSquares' ridge, ProximalGD's l1, "
              "weight_decay) over `values`; each frame holds the value, the weights and bias of "
              "`model` after training, and the final loss of every split. Ridge weights shrink "
              "smoothly towards 0; lasso weights hit 0 exactly, one after another.",
              RegularizationPath,
              params=[str_param("model", doc="the node whose weights the path follows"),
                      str_param("optimizer", doc="the optimizer node whose penalty is swept"),
                      str_param("param", "ridge", "the optimizer param to sweep"),
                      Param("values", "floats", [0.0, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0],
                            "the penalty strengths, one training run each", min=0),
                      int_param("epochs", None, "epochs per run; empty: the graph's", min=0,
                                nullable=True)],
              keywords=("ridge path", "lasso path", "shrinkage", "sweep", "lambda",
                        "regularization")),
]
