"""Estimators: op blocks whose state comes from a fit on the train split, not from gradients.

A decision tree, a forest or a k-NN classifier is compared with a network on the same data,
so it is wired like one: an op block with inputs ``input`` (N, F) and ``target`` and one
output that feeds the same metric blocks. What differs is how it learns. Its module is an
`Estimator`: before the first epoch `fit_estimators` runs the graph upstream of each one
over the whole train split (in eval mode, no gradients), hands it every sample at once,
and the estimator turns the fitted model into plain arrays held as *buffers*. From then on
its forward predicts from those buffers in torch, on every split and device, and the
arrays save with the run's weights (safetensors: no pickle of fitted objects).

The buffers' shapes are known only after the fit, so loading saved weights into a fresh,
unfitted module takes the shapes from the file. Optimizers never see an estimator: it has
no parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from nodegraph.model.errors import NodegraphError, NodeRuntimeError, first_line


class NotFittedError(Exception):
    """An estimator asked to predict before any fit (the run names its node)."""


class Estimator(nn.Module):
    """An op module fitted on whole arrays; subclasses declare `STATE` and implement
    `fit_arrays` (numpy in, named numpy arrays out) and `predict` (torch, from buffers)."""

    STATE: tuple[str, ...] = ()
    fitted: torch.Tensor  # a bool buffer: whether `fit` has run

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("fitted", torch.zeros((), dtype=torch.bool))
        for name in self.STATE:
            self.register_buffer(name, torch.empty(0))

    # -- what a subclass writes ------------------------------------------------------------

    def fit_arrays(self, x: np.ndarray, target: np.ndarray) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def out_meta(self, x: torch.Tensor, target: torch.Tensor | None) -> torch.Tensor:
        """An empty tensor shaped like the prediction, for shape inference on meta inputs."""
        raise NotImplementedError

    # -- the mechanism ---------------------------------------------------------------------

    def forward(self, x: torch.Tensor, target: torch.Tensor | None = None) -> torch.Tensor:
        if x.is_meta:
            return self.out_meta(x, target)
        if not bool(self.fitted):
            raise NotFittedError("this estimator has not been fitted; it fits on the train "
                                 "split when the graph runs (nodegraph run, or Train); in "
                                 "Python, forward(graph, compiled=result.compiled) after "
                                 "result = nodegraph.train(graph), or model.predict(...) "
                                 "after model = nodegraph.fit(graph)")
        return self.predict(x)

    def fit(self, x: torch.Tensor, target: torch.Tensor) -> None:
        """Fit on whole tensors and keep the result as buffers on the module's device."""
        arrays = self.fit_arrays(x.detach().cpu().numpy(), target.detach().cpu().numpy())
        self.load_arrays(arrays)

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        device = self.fitted.device
        for name in self.STATE:
            self._buffers[name] = torch.as_tensor(np.ascontiguousarray(arrays[name])).to(device)
        self.fitted.fill_(True)

    def arrays(self) -> dict[str, np.ndarray]:
        """The fitted state as numpy arrays (what views read)."""
        return {name: self.get_buffer(name).detach().cpu().numpy() for name in self.STATE}

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # a fresh module holds empty buffers: take the saved shapes and dtypes first
        for name in self.STATE:
            saved = state_dict.get(prefix + name)
            if saved is not None:
                self._buffers[name] = torch.empty_like(saved, device=self.fitted.device)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


def estimator_steps(compiled) -> list[tuple[str, Estimator, tuple]]:
    """(node, module, input keys) of every estimator, in topological order."""
    return [(node, module, in_keys) for node, module, in_keys, _ in compiled.module.full_plan
            if isinstance(module, Estimator)]


def split_inputs(compiled, node: str, in_keys: tuple, split: str,
                 chunk: int = 4096) -> list[torch.Tensor | None]:
    """The values wired into `node` over the whole of `split`, computed by the graph
    upstream of it in eval mode without gradients."""
    graph = compiled.exec_graph or compiled.graph
    sources = [k[0] for k in in_keys if k is not None]
    plan = compiled.module.plan(graph.upstream(sources))
    tensors = {nid: ds.tensors(split) for nid, ds in compiled.datasets.items()
               if ds.has(split)}
    if not tensors:
        return []
    n = min(len(next(iter(t.values()))) for t in tensors.values())
    parts: list[list[torch.Tensor]] = [[] for _ in in_keys]
    module = compiled.module
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            for i in range(0, n, chunk):
                values = {(nid, k): v[i:i + chunk] for nid, part in tensors.items()
                          for k, v in part.items()}
                module.run(plan, values)
                for j, key in enumerate(in_keys):
                    if key is not None:
                        parts[j].append(values[key])
    finally:
        module.train(was_training)
    return [torch.cat(p) if p else None for p in parts]


def fit_estimators(compiled, emit: Callable[[str], Any] | None = None) -> list[str]:
    """Fit every estimator of `compiled` on the train split, upstream ones first; returns
    the nodes fitted. A failure names the node."""
    fitted = []
    for node, module, in_keys in estimator_steps(compiled):
        inputs = split_inputs(compiled, node, in_keys, "train")
        if not inputs or inputs[0] is None:
            raise NodeRuntimeError(node, "has no train split to fit on",
                                   "wire it to a data block with a train split")
        wired = [t for t in inputs if t is not None]
        if len(wired) != len(inputs):
            raise NodeRuntimeError(node, "has an input that is not wired, so it cannot fit",
                                   "wire its target")
        try:
            module.fit(*wired)
        except NodegraphError as e:
            raise NodeRuntimeError(node, str(e)) from None
        except (ValueError, TypeError) as e:  # scikit-learn's words for data it refuses
            message = first_line(e)
            raise NodeRuntimeError(node, f"the fit failed: {message}") from None
        fitted.append(node)
        if emit is not None:
            emit(f"fitted '{node}' on {len(inputs[0])} training samples")
    return fitted
