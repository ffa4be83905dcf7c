"""Procedures: loops around a trained model (see nodegraph/procedure.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from nodegraph.errors import NodegraphError
from nodegraph.procedure import Procedure, ProcedureContext
from nodegraph.spec import block, choice_param, int_param, str_param

MODEL = str_param("model", doc="the node or group instance to loop around")


class RecursiveForecast(Procedure):
    """Feed each prediction back as the newest value of the input window."""

    def __init__(self, p):
        self.p = p

    def run(self, ctx: ProcedureContext) -> Iterator[dict[str, Any]]:
        p = self.p
        predict = ctx.model(p.model)
        data = ctx.split(p.split)
        x, y = data["x"], data.get("y")
        if not 0 <= p.start < len(x):
            raise NodegraphError(f"start {p.start} is outside the {p.split} split "
                                 f"({len(x)} windows)")
        window = x[p.start:p.start + 1].clone()
        if window.ndim < 2:
            raise NodegraphError(f"inputs must be windows (N, length[, features]), got "
                                 f"{tuple(x.shape)}")
        for t in range(p.steps):
            pred = predict(**{predict.inputs[0]: window})[predict.outputs[0]]
            frame: dict[str, Any] = {"t": t + 1, "prediction": pred.flatten().tolist()}
            if y is not None and p.start + t < len(y):
                frame["target"] = y[p.start + t].flatten().tolist()
            yield frame
            newest = pred.reshape(1, 1, *window.shape[2:]).to(window.dtype)
            window = torch.cat([window[:, 1:], newest], dim=1)


BLOCKS = [
    block("procedures.RecursiveForecast", "procedure",
          "Forecast many steps ahead by feeding each prediction back into the input window.\n\n"
          "Starts from window `start` of a split and predicts `steps` times; each frame holds "
          "the prediction and, where the split has it, the true value. The free-run test of "
          "a time-series model: errors compound, so it tells models apart that one-step "
          "accuracy does not.",
          lambda p: RecursiveForecast(p),
          params=[MODEL, int_param("steps", 50, "how many steps to forecast", min=1),
                  choice_param("split", ("train", "val", "test"), "test",
                               "the split whose window starts the forecast"),
                  int_param("start", 0, "index of the starting window", min=0)],
          binds="model", keywords=("time series", "free run", "multi-step", "autoregressive")),
]
