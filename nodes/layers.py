"""Layers and tensor operations: the blocks that carry weights or reshape values."""

from __future__ import annotations

from torch import nn

from nodegraph.errors import PortError
from nodegraph.spec import block, bool_param, int_param
from nodes._shapes import fmt


def _linear(p, x):
    shape = x["input"].shape
    if len(shape) < 2:
        raise PortError("input", f"Linear needs at least (N, features), got {fmt(shape)}")
    if p.in_features is not None and shape[-1] != p.in_features:
        raise PortError("input", f"expects (N, {p.in_features}) but receives {fmt(shape)}",
                        "clear in_features to infer it, or insert Flatten / check the layer "
                        "before")
    if not x["input"].dtype.is_floating_point:
        raise PortError("input", f"Linear needs real numbers, got {x['input'].dtype}",
                        "class indices go through Embedding, not Linear", kind="dtype_mismatch")
    return nn.Linear(shape[-1], p.out_features, bias=p.bias)


BLOCKS = [
    block("layers.Linear", "op",
          "Fully connected layer y = x Wᵀ + b.\n\nApplies to the last dimension; "
          "`in_features` is inferred from the incoming wire.",
          _linear, inputs=["input"], outputs=["output"],
          params=[int_param("out_features", doc="size of each output sample", min=1),
                  bool_param("bias", True, "learn an additive bias"),
                  int_param("in_features", None, "size of each input sample; empty means "
                            "inferred from the wire", min=1, nullable=True)],
          keywords=("dense", "fully connected", "affine", "mlp")),
]
