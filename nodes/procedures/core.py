"""Procedures: loops around a trained model (see nodegraph/runtime/procedure.py).

- `procedures.RecursiveForecast`: many steps ahead, each prediction fed back as input;
- `procedures.LotteryTicket`: iterative magnitude pruning with rewinding (Frankle &
  Carbin 2019): train, prune the smallest weights, rewind the survivors to their initial
  values and train again, against a control that re-initialises them (or keeps their
  trained values); one frame per round with the sparsity and both accuracies.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

import torch
from torch.nn.utils import prune

from nodegraph.kinds.declare import procedure
from nodegraph.kinds.procedure_context import Procedure, ProcedureContext
from nodegraph.model.errors import NodegraphError
from nodegraph.model.spec import (
    Params,
    choice_param,
    float_param,
    int_param,
    node_param,
)

if TYPE_CHECKING:
    from nodegraph.kinds.procedure_context import Compiled

MODEL = node_param("model", doc="the node or group instance to loop around",
                   of=("op", "group"))


M = TypeVar("M")


def module_as(ctx: ProcedureContext, node: str, kind: type[M], refusal: str) -> M:
    """The module `node` runs, which the procedure needs to be a `kind`; otherwise a
    NodegraphError: "'node' " + `refusal`."""
    module = ctx.compiled.module.module_of(node)
    if not isinstance(module, kind):
        raise NodegraphError(f"'{node}' {refusal}")
    return module


@contextmanager
def seeded(ctx: ProcedureContext):
    """torch's global generator seeded from the procedure's, restored afterwards: blocks
    draw from the global one, and a procedure must neither disturb it nor depend on it."""
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=ctx.generator))
    gpus = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=gpus):  # manual_seed seeds the GPU's generator too
        torch.manual_seed(seed)
        yield


class RecursiveForecastParams(Params):
    model: str
    steps: int
    split: str
    start: int


class RecursiveForecast(Procedure):
    """Feed each prediction back as the newest value of the input window."""

    def __init__(self, p: RecursiveForecastParams):
        self.p = p

    def run(self, ctx: ProcedureContext) -> Iterator[dict[str, Any]]:
        p = self.p
        predict = ctx.model()  # the bound model (`model`)
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


# -- lottery tickets -----------------------------------------------------------------------

Weights = dict[str, torch.Tensor]  # "node.param" -> tensor


def prunable(c: Compiled, node: str) -> list[str]:
    """"node.param" of every weight matrix or kernel (2+ dims) of `node` or of the inner
    nodes of group instance `node`; biases and norm scales are not pruned (Frankle &
    Carbin prune weights only)."""
    flat = c.report.flat
    members = (flat.members(node) if flat is not None else None) or [node]
    names = []
    for member in members:
        module = c.module.module_of(member)
        if module is None or member in (flat.shared if flat else {}):
            continue
        names += [f"{member}.{name}" for name, p in module.named_parameters()
                  if p.ndim >= 2 and p.requires_grad]
    if not names:
        raise NodegraphError(f"'{node}' has no weight matrices or kernels to prune")
    return names


def magnitude_masks(weights: Weights, masks: Weights, rate: float, scope: str) -> Weights:
    """New masks pruning the fraction `rate` of the surviving weights with the smallest
    magnitude: in each tensor on its own (layer) or ranked all together (global)."""
    def cut(alive: torch.Tensor) -> float:
        k = int(round(rate * alive.numel()))
        return float("-inf") if k == 0 else alive.kthvalue(k).values.item()

    if scope == "global":
        threshold = cut(torch.cat([weights[k].abs()[masks[k].bool()] for k in weights]))
        return {k: masks[k] * (weights[k].abs() > threshold) for k in weights}
    return {k: masks[k] * (weights[k].abs() > cut(weights[k].abs()[masks[k].bool()]))
            for k in weights}


def _split(key: str) -> tuple[str, str]:
    node, _, name = key.partition(".")
    return node, name


def effective(c: Compiled, key: str) -> torch.Tensor:
    """The weight "node.param" a block computes with: weight_orig × mask once pruned."""
    node, name = _split(key)
    module = c.module.module_of(node)
    if hasattr(module, name + "_mask"):
        return (getattr(module, name + "_orig") * getattr(module, name + "_mask")).detach()
    return getattr(module, name).detach()


def masked_weights(c: Compiled, keys: list[str]) -> Weights:
    return {k: effective(c, k).clone() for k in keys}


def apply_masks(c: Compiled, masks: Weights) -> None:
    """Prune with torch.nn.utils.prune: the block's weight becomes weight_orig × mask,
    recomputed before every forward, so pruned weights stay exactly zero in training
    (their gradient is zero too, and whatever an optimizer does to weight_orig there is
    multiplied away)."""
    for key, mask in masks.items():
        node, name = _split(key)
        prune.custom_from_mask(c.module.module_of(node), name, mask.to(c.device))


class LotteryTicketParams(Params):
    model: str
    rounds: int
    rate: float
    scope: str
    rewind_epoch: int
    control: str
    epochs: int | None
    metric: str


class LotteryTicket(Procedure):
    """Iterative magnitude pruning: each round prunes, rewinds and retrains, and trains a
    control with the same mask."""

    def __init__(self, p: LotteryTicketParams):
        self.p = p

    def run(self, ctx: ProcedureContext) -> Iterator[dict[str, Any]]:
        p = self.p
        opts = ctx.training
        epochs = p.epochs if p.epochs is not None else opts["epochs"]
        if p.rewind_epoch > epochs:
            raise NodegraphError(f"rewind_epoch {p.rewind_epoch} is after the last of the "
                                 f"{epochs} training epochs")
        self.ctx = ctx
        with seeded(ctx):
            dense = self.fresh(opts["seed"])
            keys = prunable(dense, cast(str, ctx.bound))  # the block binds its model
            self.metric = self.metric_node(dense)
            init = {k: v.detach().clone() for k, v in dense.module.block_state().items()}
            snapshot = self.train(dense, p.rewind_epoch)
            rewind_to = snapshot or init
            scores = self.scores()
            masks = {k: torch.ones_like(w) for k, w in masked_weights(dense, keys).items()}
            yield self.frame(0, masks, scores, scores)
            trained = dense
            for r in range(1, p.rounds + 1):
                masks = magnitude_masks(masked_weights(trained, keys), masks, p.rate, p.scope)
                ticket = self.fresh(opts["seed"], rewind_to, masks)
                self.train(ticket)
                ticket_scores = self.scores()
                if p.control == "reinit":  # the same mask on a new random initialisation
                    control = self.fresh(opts["seed"] + 1000 * r, None, masks)
                else:  # the same mask on the trained values, trained on (fine-tuning)
                    control = self.fresh(opts["seed"], trained_state(trained), masks)
                self.train(control)
                yield self.frame(r, masks, ticket_scores, self.scores())
                trained = ticket

    def fresh(self, seed: int, state: Weights | None = None,
              masks: Weights | None = None) -> Compiled:
        """The graph compiled anew (its own optimizers, random init from `seed`), started
        from `state` where given, pruned by `masks`."""
        c = self.ctx.compile(seed)
        if state is not None:
            c.module.load_block_state(state)
        if masks:
            apply_masks(c, masks)
        return c

    def train(self, c: Compiled, snapshot_epoch: int = 0) -> Weights | None:
        """Train `c` for the graph's (or this block's) epochs; the weights after epoch
        `snapshot_epoch` (late rewinding) when it is above 0."""
        taken: Weights = {}

        def take(epoch: int) -> None:
            if epoch == snapshot_epoch:
                taken.update({k: v.detach().clone() for k, v in
                              c.module.block_state().items()})

        self.final = self.ctx.run_training(c, self.p.epochs, take)
        return taken or None

    def metric_node(self, c: Compiled) -> str:
        names = [m.node for m in c.metrics]
        if self.p.metric and self.p.metric not in names:
            raise NodegraphError(f"metric '{self.p.metric}' is not a metric block of the "
                                 f"graph (metrics: {', '.join(names) or 'none'})")
        if not names:
            raise NodegraphError("the graph has no metric block to score the tickets with "
                                 "(add e.g. metrics.Accuracy)")
        return self.p.metric or names[0]

    def scores(self) -> dict[str, float]:
        """The metric on every held-out split, after the last training run."""
        return {split: values[self.metric] for split, values in self.final.items()
                if split != "train" and self.metric in values}

    def frame(self, r: int, masks: Weights, ticket: dict, control: dict) -> dict[str, Any]:
        total = sum(m.numel() for m in masks.values())
        left = int(sum(m.sum().item() for m in masks.values()))
        frame: dict[str, Any] = {"round": r, "sparsity": round(1 - left / total, 6),
                                 "weights_left": left}
        for split, value in ticket.items():
            frame[f"{split}_rewind"] = value
        for split, value in control.items():
            frame[f"{split}_{self.p.control}"] = value
        frame["layer_sparsity"] = {k: round(1 - m.mean().item(), 6) for k, m in masks.items()}
        return frame


def trained_state(c: Compiled) -> Weights:
    """Block state with pruned weights folded back to plain `param` keys."""
    state = {}
    for key, value in c.module.block_state().items():
        if key.endswith("_orig"):
            key = key.removesuffix("_orig")
            value = effective(c, key)
        if not key.endswith("_mask"):
            state[key] = value.detach().clone()
    return state


BLOCKS = [
    procedure("procedures.RecursiveForecast",
              "Forecast many steps ahead by feeding each prediction back into the input window.\n\n"
              "Starts from window `start` of a split and predicts `steps` times; each frame holds "
              "the prediction and, where the split has it, the true value. The free-run test of "
              "a time-series model: errors compound, so it tells models apart that one-step "
              "accuracy does not.",
              RecursiveForecast,
              params=[MODEL, int_param("steps", 50, "how many steps to forecast", min=1),
                      choice_param("split", ("train", "val", "test"), "test",
                                   "the split whose window starts the forecast"),
                      int_param("start", 0, "index of the starting window", min=0)],
              binds="model", keywords=("time series", "free run", "multi-step", "autoregressive")),
    procedure("procedures.LotteryTicket",
              "Find a lottery ticket: prune the smallest weights, rewind the rest, retrain."
              "\n\nIterative magnitude pruning (Frankle & Carbin 2019): trains the graph from "
              "its initial weights θ₀, then for each round removes the fraction `rate` of the "
              "surviving weights of `model` with the smallest magnitude (per layer or ranked "
              "globally), resets the survivors to θ₀ (or to their values after "
              "`rewind_epoch` epochs) and trains again with the mask held. A control trains "
              "the same mask from a new random initialisation (reinit) or from the trained "
              "values (continue). Each frame is one round: sparsity and the metric on val/test "
              "for the rewound ticket and the control. Winning tickets keep the dense "
              "network's accuracy to high sparsity; re-initialised ones fall off sooner.",
              LotteryTicket,
              params=[node_param("model", doc="the node or group instance whose weight "
                                 "matrices and kernels are pruned (biases are kept)",
                                 of=("op", "group")),
                      int_param("rounds", 5, "pruning rounds after the dense training", min=1),
                      float_param("rate", 0.5, "fraction of the surviving weights pruned per "
                                  "round (p % / 100); after r rounds 1 − (1 − rate)^r are gone",
                                  min=0, max=0.99),
                      choice_param("scope", ("layer", "global"), "layer",
                                   "layer: each weight tensor loses `rate` of its survivors; "
                                   "global: the smallest magnitudes over all of them"),
                      int_param("rewind_epoch", 0, "0: rewind to the initial weights θ₀; k: to "
                                "the weights after k epochs of the dense training (late "
                                "rewinding)", min=0),
                      choice_param("control", ("reinit", "continue"), "reinit",
                                   "reinit: the same mask on new random weights; continue: the "
                                   "same mask on the trained weights, trained on"),
                      int_param("epochs", None, "training epochs per run; empty: the graph's",
                                min=1, nullable=True),
                      node_param("metric", "", "the metric block reported; empty: the first",
                                 of=("metric",))],
              binds="model", keywords=("pruning", "lottery ticket", "sparsity", "rewinding",
                                       "magnitude pruning", "imp")),
]
