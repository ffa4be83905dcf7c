"""Graph data: one graph whose nodes are the samples, for node classification.

A graph model needs the whole graph in every step: a node's prediction depends on its
neighbours, wherever they fall in the split. So a graph dataset keeps every node in every
split and hides the labels instead. Each split is a copy of the graph, `x` (nodes, F) and
`adjacency` (nodes, nodes), whose `y` holds the labels of that split's nodes and
IGNORE (−100) elsewhere; cross-entropy skips −100 (torch's ignore_index), so the training
loss sees only the training nodes while the model sees all of them (transductive learning).
The batch is always the whole graph, in order: no batch size, no shuffling.
"""

from __future__ import annotations

import numpy as np
import torch

from nodegraph.kinds.datameta import DataMeta, labels_counted, split_sizes
from nodegraph.kinds.dataset import Dataset, data_params, from_arrays, split_indices
from nodegraph.kinds.declare import data
from nodegraph.model.spec import Params, Port, choice_param

IGNORE = -100  # torch's default ignore_index


def graph_dataset(arrays: dict[str, np.ndarray], labels: np.ndarray,
                  split_nodes: dict[str, np.ndarray]) -> Dataset:
    """A Dataset with one whole-graph batch per split: the node-aligned `arrays` repeated
    per split, and `y` = `labels` on the split's nodes, IGNORE on the others."""
    n = len(labels)
    parts: dict[str, list] = {k: [] for k in [*arrays, "y"]}
    rows: dict[str, np.ndarray] = {}
    for split, nodes in split_nodes.items():
        if len(nodes) == 0:
            continue
        rows[split] = np.arange(len(rows) * n, (len(rows) + 1) * n)
        y = np.full(n, IGNORE, dtype=np.int64)
        y[nodes] = labels[nodes]
        for k, a in arrays.items():
            parts[k].append(a)
        parts["y"].append(y)
    stacked = {k: np.concatenate(v) for k, v in parts.items()}
    return from_arrays(stacked, {"batch_size": 0, "shuffle": False}, given_splits=rows)


def karate_club() -> tuple[np.ndarray, np.ndarray]:
    """Zachary's karate club from networkx: the 0/1 adjacency (34, 34) of who met outside
    the club, and each member's side after the split (0 Mr. Hi, 1 the Officer)."""
    import networkx as nx  # 0.25 s: only when the karate club is built

    g = nx.karate_club_graph()
    nodes = sorted(g.nodes)
    adjacency = nx.to_numpy_array(g, nodelist=nodes, weight=None)
    labels = np.array([g.nodes[i]["club"] != "Mr. Hi" for i in nodes], dtype=np.int64)
    return adjacency, labels


# members on each side (Mr. Hi's, the Officer's), so validation need not import networkx;
# tests/test_datameta_builtin.py holds them to the graph networkx ships
KARATE_SIDES = (17, 17)


class KarateClubParams(Params):
    features: str
    val_fraction: float
    test_fraction: float
    split: str
    split_seed: int
    folds: int
    fold: int
    dtype: str


def _karate_meta(p: KarateClubParams):
    """Every split holds the whole graph (34 rows) once it labels any node; which splits do
    follows from the split params and the sides' sizes."""
    n = sum(KARATE_SIDES)
    features = n if p.features == "identity" else 1
    ports = {"x": ((features,), torch.float32), "adjacency": ((n,), torch.float32),
             "y": ((), torch.int64)}
    return DataMeta(ports, dict.fromkeys(split_sizes(n, p, labels_counted(KARATE_SIDES)), n), 0,
                    classes={"y": len(KARATE_SIDES)})


def _karate(p: KarateClubParams):
    adjacency, labels = karate_club()
    n = len(labels)
    features = np.eye(n) if p.features == "identity" else adjacency.sum(1, keepdims=True)
    idx = split_indices(n, p.val_fraction, p.test_fraction, p.split, p.split_seed, labels,
                        p.folds, p.fold)
    return graph_dataset({"x": features.astype(np.float32),
                          "adjacency": adjacency.astype(np.float32)}, labels, idx)


SPLIT_PARAMS = [q for q in data_params(val_fraction=0.2, test_fraction=0.2,
                                       split="stratified")
                if q.name not in ("batch_size", "shuffle", "normalize")]

BLOCKS = [
    data("data.KarateClub",
         "Zachary's karate club: 34 members, 78 friendships, and the side each took when "
         "the club split.\n\n"
         "Node classification on one graph: predict a member's side from who they are "
         "friends with. x is the identity (each node its own one-hot, so a GCN learns an "
         "embedding per node) or the degree; every split sees the whole graph, its y "
         "holds the labels of its own nodes and −100 (ignored by cross-entropy) on the "
         "rest. The split params choose which nodes are labelled.",
         _karate, meta=_karate_meta,
         outputs=[Port("x", doc="node features (34, F)"),
                  Port("y", doc="the club (0 Mr. Hi, 1 Officer) of this split's nodes, −100 "
                       "elsewhere (34,)"),
                  Port("adjacency", doc="0/1 adjacency matrix (34, 34)")],
         params=[choice_param("features", ("identity", "degree"), "identity",
                              "identity: a one-hot per node (34 features); degree: the "
                              "number of friends (1 feature)"),
                 *SPLIT_PARAMS],
         keywords=("graph", "gnn", "social network", "zachary", "node classification")),
]
