"""Graph neural network blocks: layers that mix each node's features with its neighbours'.

A graph arrives as two wires from its data block: `features` (nodes, F), one row per node,
and `adjacency` (nodes, nodes), A[i, j] > 0 when j is a neighbour of i. The batch is the
whole graph (see `nodes.data.graphs`), so the first dim is the node count.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from nodegraph.kinds.declare import op
from nodegraph.kinds.dtypes import DTYPE_PARAM
from nodegraph.model.errors import PortError
from nodegraph.model.spec import (
    Port,
    bool_param,
    choice_param,
    int_param,
)
from nodes._shapes import fmt
from nodes.layers.dense import WeightParams, start_weights, weight_params


def normalized_adjacency(adjacency: torch.Tensor, self_loops: bool = True,
                         normalize: str = "symmetric") -> torch.Tensor:
    """Â = A + I (with self loops), then D^-1/2 Â D^-1/2 (symmetric), D^-1 Â (mean) or Â
    (none), D the diagonal of row sums of Â. A node without neighbours keeps a zero row."""
    a = adjacency
    if self_loops:
        a = a + torch.eye(len(a), dtype=a.dtype, device=a.device)
    if normalize == "none":
        return a
    degree = a.sum(1)
    if normalize == "mean":
        return a * torch.where(degree > 0, 1 / degree, 0)[:, None]
    d = torch.where(degree > 0, degree.rsqrt(), 0)
    return d[:, None] * a * d[None, :]


class GCN(nn.Linear):
    """Kipf & Welling's graph convolution: Â X Wᵀ + b with Â the normalised adjacency."""

    def __init__(self, in_features: int, out_features: int, bias: bool, self_loops: bool,
                 normalize: str):
        super().__init__(in_features, out_features, bias)
        self.self_loops, self.normalize = self_loops, normalize

    def forward(self, features: torch.Tensor,  # type: ignore[override]  # two inputs
                adjacency: torch.Tensor) -> torch.Tensor:
        a = normalized_adjacency(adjacency.to(features.dtype), self.self_loops, self.normalize)
        out = a @ F.linear(features, self.weight)  # transform first: fewer columns to mix
        return out + self.bias if self.bias is not None else out


class GCNParams(WeightParams):
    out_features: int
    bias: bool
    add_self_loops: bool
    normalize: str
    dtype: str


def _gcn(p: GCNParams, x):
    h, a = x["features"], x["adjacency"]
    if h.ndim != 2 or not h.dtype.is_floating_point:
        raise PortError("features", f"needs real node features (nodes, F), got {h.dtype} "
                        f"{fmt(h.shape)}", "one row per node; stack GCN layers on the "
                        "previous layer's output")
    if a.shape != (h.shape[0], h.shape[0]):
        raise PortError("adjacency", f"must be square (nodes, nodes) = ({h.shape[0]}, "
                        f"{h.shape[0]}) for {h.shape[0]} nodes, got {tuple(a.shape)}",
                        "wire the adjacency of the same graph; the batch must be the whole "
                        "graph (batch_size 0, no shuffling)")
    return start_weights(GCN(h.shape[1], p.out_features, p.bias, p.add_self_loops,
                             p.normalize), p, "(out_features, in_features)")


BLOCKS = [
    op("graph.GCN",
       "Graph convolution D^-1/2 (A + I) D^-1/2 X Wᵀ + b: each node averages its "
       "neighbours' transformed features.\n\n"
       "Kipf & Welling's layer. A node's new features mix its own (the self loop I) and "
       "its neighbours', weighted 1/√(d_i d_j) so well-connected nodes do not dominate. "
       "Two layers with a ReLU between see two hops of the graph.",
       _gcn,
       inputs=[Port("features", doc="node features (nodes, F)"),
               Port("adjacency", doc="adjacency matrix (nodes, nodes), A[i, j] > 0 for "
                    "an edge")],
       outputs=[Port("output", doc="new node features (nodes, out_features)")],
       params=[int_param("out_features", doc="features per node after the layer", min=1),
               bool_param("bias", True, "learn an additive bias"),
               bool_param("add_self_loops", True, "add I to A, so a node keeps its own "
                          "features"),
               choice_param("normalize", ("symmetric", "mean", "none"), "symmetric",
                            "symmetric: D^-1/2 Â D^-1/2 (Kipf & Welling); mean: D^-1 Â "
                            "(average of the neighbours); none: the sum"),
               *weight_params("(out_features, in_features)"), DTYPE_PARAM],
       keywords=("gnn", "graph convolution", "kipf", "message passing", "node "
                 "classification")),
]

