"""The numbers behind the editor's per-node views, computed without Qt.

The editor's node views (`nodegraph/gui/training/node_views.py`) only draw; what they draw comes
from here, so it can be checked against the model and the probe frames directly:

- from probe frames (live or replayed from a `--probe-out` file): a node's activation or
  gradient histograms over time on one common value axis, and the gradient norm of each
  layer's weights over time (the vanishing-gradient picture);
- from the model (trained or initial weights): a node's outputs on a split, a 2-D
  classifier's decision grid, a latent-space scatter (PCA to two dimensions when the code
  is wider), conv feature maps and attention weights per head, Hopfield recall
  trajectories with their energies, and procedure trajectories shaped for display
  (sample grids, Gibbs chains, DDPM denoising strips).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from nodegraph.model.errors import NodegraphError
from nodegraph.runtime.compile import Compiled, Key
from nodegraph.runtime.probes import Histogram, ProbeFrame

# -- from probe frames -----------------------------------------------------------------------


@dataclass(frozen=True)
class HistogramHistory:
    """Histograms of one node port over time, re-binned onto one value axis."""

    steps: list[int]
    edges: np.ndarray  # (bins + 1,) common bin edges
    counts: np.ndarray  # (frames, bins): counts per frame on the common bins


def _summary(frame: ProbeFrame, node: str, port: str, which: str):
    table = frame.outputs if which == "output" else frame.grads
    return table.get(node, {}).get(port)


def rebin(hist: Histogram, edges: np.ndarray) -> np.ndarray:
    """`hist`'s counts spread onto `edges`, each source bin uniformly over its width; a
    histogram of a constant (lo == hi) lands whole in the bin holding that value."""
    counts = np.asarray(hist.counts, dtype=float)
    out = np.zeros(len(edges) - 1)
    if hist.hi <= hist.lo:
        i = int(np.clip(np.searchsorted(edges, hist.lo, side="right") - 1, 0, len(out) - 1))
        out[i] = counts.sum()
        return out
    src = np.linspace(hist.lo, hist.hi, len(counts) + 1)
    for lo, hi, c in zip(src[:-1], src[1:], counts, strict=True):
        if c == 0:
            continue
        overlap = np.clip(np.minimum(edges[1:], hi) - np.maximum(edges[:-1], lo), 0, None)
        out += c * overlap / (hi - lo)
    return out


def histogram_history(frames: Sequence[ProbeFrame], node: str, port: str,
                      which: str = "output", bins: int = 64) -> HistogramHistory | None:
    """The `which` ("output" or "grad") histograms of `node.port` in `frames`, on bins
    spanning every frame's range; None when no frame holds that port."""
    found = [(f.step, s.hist) for f in frames
             if (s := _summary(f, node, port, which)) is not None
             and math.isfinite(s.hist.lo) and math.isfinite(s.hist.hi)]
    if not found:
        return None
    lo = min(h.lo for _, h in found)
    hi = max(h.hi for _, h in found)
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1)
    return HistogramHistory([s for s, _ in found], edges,
                            np.stack([rebin(h, edges) for _, h in found]))


def on_step_axis(h: HistogramHistory, columns: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """The history drawn against the step: `columns` even steps from the first frame's to
    the last's, each showing the latest frame at or before it (the prober's interval
    grows, so frames are not evenly spaced). Returns (column steps, (columns, bins))."""
    first, last = h.steps[0], h.steps[-1]
    xs = np.linspace(first, last, min(columns, last - first + 1))
    index = np.searchsorted(np.asarray(h.steps), xs, side="right") - 1
    return xs, h.counts[index]


def stat_history(frames: Sequence[ProbeFrame], node: str, port: str, field: str,
                 which: str = "output") -> tuple[list[int], list[float]]:
    """One summary number (mean, std, norm, zero_frac...) of `node.port` per frame."""
    steps, values = [], []
    for f in frames:
        s = _summary(f, node, port, which)
        if s is not None:
            steps.append(f.step)
            values.append(float(getattr(s, field)))
    return steps, values


def layer_grad_norms(frame: ProbeFrame) -> dict[str, float]:
    """Per node with trainable weights, in forward order: the norm of the gradient of all
    its parameters together, sqrt(Σ ||∂L/∂w||²)."""
    squares: dict[str, float] = {}
    for name, p in frame.params.items():
        node = name.split(".", 1)[0]
        squares[node] = squares.get(node, 0.0) + p.grad_norm ** 2
    rank = {n: i for i, n in enumerate(frame.order)}
    ordered = sorted(squares, key=lambda n: rank.get(n, len(rank)))
    return {n: math.sqrt(squares[n]) for n in ordered}


def grad_norm_history(frames: Sequence[ProbeFrame]
                      ) -> tuple[list[str], list[int], np.ndarray]:
    """Layers (forward order), steps, and a (layers, frames) array of per-layer gradient
    norms (NaN where a frame lacks a layer, e.g. an optimizer that did not step)."""
    per_frame = [layer_grad_norms(f) for f in frames]
    layers: list[str] = []
    for norms in per_frame:
        layers += [n for n in norms if n not in layers]
    table = np.full((len(layers), len(frames)), np.nan)
    for j, norms in enumerate(per_frame):
        for i, n in enumerate(layers):
            if n in norms:
                table[i, j] = norms[n]
    return layers, [f.step for f in frames], table


# -- running the model -----------------------------------------------------------------------


def flat_key(compiled: Compiled, node: str, port: str) -> Key:
    """Where the run holds output `port` of top-level `node` (a group's: an inner node's)."""
    flat = compiled.report.flat
    key = (node, port)
    while flat is not None and key in flat.outputs:
        key = flat.outputs[key]
    return key


def members(compiled: Compiled, node: str) -> list[str]:
    flat = compiled.report.flat
    return (flat.members(node) if flat is not None else []) or [node]


def output_ports(compiled: Compiled, node: str) -> list[str]:
    return [p.name for p in compiled.graph.registry.get(compiled.graph.nodes[node].type).outputs]


def split_of(compiled: Compiled, prefer: Sequence[str] = ("val", "test", "train")) -> str:
    """The first of `prefer` that the graph's data blocks hold."""
    for split in prefer:
        if any(ds.has(split) for ds in compiled.datasets.values()):
            return split
    raise NodegraphError("the graph has no data block")


def data_values(compiled: Compiled, split: str, limit: int | None = None
                ) -> dict[Key, torch.Tensor]:
    """Every data block's `split` (its train split when it lacks that one), keyed (node, port)."""
    values = {}
    for name, ds in compiled.datasets.items():
        part = ds.tensors(split if ds.has(split) else "train")
        values.update({(name, port): t[:limit] for port, t in part.items()})
    return values


@torch.no_grad()
def node_outputs(compiled: Compiled, node: str, values: dict[Key, torch.Tensor]
                 ) -> dict[str, torch.Tensor]:
    """The outputs of top-level `node` (block or group instance) on `values`, by port, run
    in eval mode without gradients; the module's mode is restored afterwards."""
    run_graph = compiled.exec_graph or compiled.graph
    module = compiled.module
    plan = module.plan(run_graph.upstream(members(compiled, node)))
    was_training = module.training
    module.eval()
    try:
        out = module.run(plan, dict(values))
    finally:
        module.train(was_training)
    keys = {port: flat_key(compiled, node, port) for port in output_ports(compiled, node)}
    return {port: out[k] for port, k in keys.items() if isinstance(out.get(k), torch.Tensor)}


# -- images, feature maps, attention ---------------------------------------------------------


def normalized(img: np.ndarray) -> np.ndarray:
    """`img` scaled to [0, 1] (a constant image becomes 0.5)."""
    lo, hi = np.nanmin(img), np.nanmax(img)
    return np.full_like(img, 0.5) if hi <= lo else (img - lo) / (hi - lo)


def image_grid(images: np.ndarray | Sequence[np.ndarray], cols: int | None = None,
               pad: int = 1, per_tile: bool = False) -> np.ndarray:
    """Tile (K, H, W) images row by row into one (rows·(H+pad)−pad, cols·(W+pad)−pad)
    array; gaps are NaN. `per_tile` scales each tile to [0, 1] on its own."""
    images = np.asarray(images, dtype=float)
    if images.ndim == 2:
        images = images[None]
    k, h, w = images.shape
    cols = cols or math.ceil(math.sqrt(k))
    rows = math.ceil(k / cols)
    grid = np.full((rows * (h + pad) - pad, cols * (w + pad) - pad), np.nan)
    for i, img in enumerate(images):
        r, c = divmod(i, cols)
        grid[r * (h + pad):r * (h + pad) + h, c * (w + pad):c * (w + pad) + w] = (
            normalized(img) if per_tile else img)
    return grid


def as_images(t: torch.Tensor, sample: int = 0) -> np.ndarray | None:
    """One sample of an image-like output as (K, H, W): its channels for (N, C, H, W),
    the image for (N, H, W); None for other shapes."""
    if t.ndim == 4 and min(t.shape[2:]) >= 2:
        return t[sample].detach().float().cpu().numpy()
    if t.ndim == 3 and min(t.shape[1:]) >= 4:
        return t[sample:sample + 1].detach().float().cpu().numpy()
    return None


def attention_heads(weights: torch.Tensor, sample: int = 0) -> np.ndarray:
    """Attention weights of one sample as (heads, queries, keys); (N, L, S) is one head."""
    if weights.ndim == 3:
        return weights[sample:sample + 1].detach().float().cpu().numpy()
    if weights.ndim == 4:
        return weights[sample].detach().float().cpu().numpy()
    raise NodegraphError(f"attention weights are (N, heads, L, S) or (N, L, S), got "
                         f"{tuple(weights.shape)}")


def is_attention(t: torch.Tensor, port: str) -> bool:
    return "weights" in port and t.ndim in (3, 4) and t.shape[-1] > 1


# -- 2-D decision boundary -------------------------------------------------------------------


@dataclass(frozen=True)
class DecisionGrid:
    """A 2-D classifier evaluated on a grid over its data."""

    xs: np.ndarray  # (R,) grid x values
    ys: np.ndarray  # (R,) grid y values
    scores: np.ndarray  # (R, R, K) the node's raw outputs at (ys[i], xs[j])
    prob: np.ndarray  # (R, R) probability of class 1 (K = 1) or of the predicted class
    classes: np.ndarray  # (R, R) predicted class
    points: np.ndarray  # (N, 2) the data
    labels: np.ndarray | None  # (N,) their classes
    input: Key  # the data port the grid replaces


def two_d_input(compiled: Compiled, node: str) -> Key | None:
    """The data port with two features per sample that `node` depends on, if any."""
    run_graph = compiled.exec_graph or compiled.graph
    needed = run_graph.upstream(members(compiled, node))
    for name, ds in compiled.datasets.items():
        if name not in needed:
            continue
        for port, t in ds.tensors("train").items():
            if t.ndim == 2 and t.shape[1] == 2 and t.is_floating_point():
                return (name, port)
    return None


def class_probabilities(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(probability shown, predicted class) from a classifier's outputs (M, K): one
    output is a logit (or already a probability when it stays in [0, 1]), several are
    logits of a softmax (or probabilities when each row sums to 1)."""
    if scores.shape[1] == 1:
        s = scores[:, 0]
        p = s if bool(((s >= 0) & (s <= 1)).all()) else torch.sigmoid(s)
        return p, (p > 0.5).long()
    sums_to_one = bool((scores >= 0).all()) and torch.allclose(scores.sum(1),
                                                               torch.ones(len(scores)))
    p = scores if sums_to_one else scores.softmax(1)
    best, cls = p.max(1)
    return best, cls


def decision_grid(compiled: Compiled, node: str, port: str | None = None,
                  resolution: int = 80, margin: float = 0.15) -> DecisionGrid:
    """`node`'s output over a resolution × resolution grid covering the training data (plus
    `margin` of its range on each side), with the data points and their labels."""
    key = two_d_input(compiled, node)
    if key is None:
        raise NodegraphError(f"'{node}' does not depend on a data port with two features, "
                             "so it has no 2-D decision boundary")
    train = compiled.datasets[key[0]].tensors("train")
    points = train[key[1]].detach().float().cpu()
    lo, hi = points.min(0).values, points.max(0).values
    span = (hi - lo).clamp_min(1e-6)
    lo, hi = lo - margin * span, hi + margin * span
    xs = torch.linspace(float(lo[0]), float(hi[0]), resolution)
    ys = torch.linspace(float(lo[1]), float(hi[1]), resolution)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    grid = torch.stack([gx.flatten(), gy.flatten()], 1)
    device = next(iter(train.values())).device
    values = {key: grid.to(device, train[key[1]].dtype)}
    try:
        outs = node_outputs(compiled, node, values)
    except NodegraphError as e:
        raise NodegraphError(f"'{node}' needs more than the inputs to classify a point "
                             f"(pick the model's output node): {e}") from None
    port = port or next(iter(outs))
    scores = outs[port].detach().float().cpu().reshape(len(grid), -1)
    prob, classes = class_probabilities(scores)
    labels = label_of({(key[0], name): t for name, t in train.items()})
    shape = (resolution, resolution)
    return DecisionGrid(xs.numpy(), ys.numpy(), scores.reshape(*shape, -1).numpy(),
                        prob.reshape(shape).numpy(), classes.reshape(shape).numpy(),
                        points.numpy(), labels, key)


# -- latent space ----------------------------------------------------------------------------


def pca_2d(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Projection of the rows of z onto their first two principal axes, and the share of
    the variance each axis explains. Two or fewer dimensions are returned as they are."""
    z = np.asarray(z, dtype=float).reshape(len(z), -1)
    if z.shape[1] <= 2:
        pts = np.zeros((len(z), 2))
        pts[:, :z.shape[1]] = z
        return pts, np.array([1.0, 0.0]) if z.shape[1] == 1 else np.array([np.nan, np.nan])
    centred = z - z.mean(0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    axes = vt[:2]
    axes *= np.sign(axes[np.arange(2), np.abs(axes).argmax(1)])[:, None]  # a fixed sign
    var = s ** 2
    return centred @ axes.T, var[:2] / var.sum()


@dataclass(frozen=True)
class LatentScatter:
    points: np.ndarray  # (N, 2)
    labels: np.ndarray | None  # (N,) class of each sample, for colour
    explained: np.ndarray  # (2,) variance share of each axis (NaN: the code is 2-D)
    dims: int  # the code's width
    split: str


def label_of(values: dict[Key, torch.Tensor]) -> np.ndarray | None:
    """Integer class labels of a split (a data port named y with one label per sample)."""
    for (_, port), t in values.items():
        if port == "y" and (t.ndim == 1 or (t.ndim == 2 and t.shape[1] == 1)):
            if not t.is_floating_point() or bool((t == t.round()).all()):
                return t.detach().cpu().reshape(-1).long().numpy()
    return None


def latent_scatter(compiled: Compiled, node: str, port: str | None = None,
                   limit: int = 2000) -> LatentScatter:
    """`node`'s output on the val (or test, or train) split as 2-D points, coloured by
    the samples' labels: the code itself when it has two dimensions, else its PCA."""
    split = split_of(compiled)
    values = data_values(compiled, split, limit)
    outs = node_outputs(compiled, node, values)
    port = port or next(iter(outs))
    z = outs[port].detach().float().cpu().numpy()
    points, explained = pca_2d(z)
    return LatentScatter(points, label_of(values), explained, int(np.prod(z.shape[1:])), split)


# -- Hopfield recall and procedures ---------------------------------------------------------


@dataclass(frozen=True)
class Recall:
    trajectory: np.ndarray  # (N, steps + 1, units)
    energy: np.ndarray  # (N, steps + 1)
    iterations: np.ndarray  # (N,) first settled iteration, -1 when still moving


def hopfield_recall(compiled: Compiled, node: str, limit: int = 16) -> Recall:
    """A Hopfield block's recall of the first samples of its data: every state and its
    energy per step (what its trajectory and energy ports output)."""
    outs = node_outputs(compiled, node, data_values(compiled, split_of(compiled, ("train",)),
                                                    limit))
    if "trajectory" not in outs or "energy" not in outs:
        raise NodegraphError(f"'{node}' is not a Hopfield recall block")
    return Recall(outs["trajectory"].float().cpu().numpy(), outs["energy"].float().cpu().numpy(),
                  outs["iterations"].cpu().numpy())


@dataclass(frozen=True)
class Trajectory:
    """A procedure's frames shaped for display."""

    kind: str  # "images": rows of image strips; "points": 2-D point sets; "text"; "series"
    labels: list[str]  # one caption per column (step) or per frame
    images: np.ndarray | None = None  # (rows, cols, H, W)
    points: list[np.ndarray] | None = None  # per frame (M, 2)
    text: str = ""
    series: dict[str, list[float]] | None = None


def _image_array(image) -> np.ndarray | None:
    a = np.asarray(image, dtype=float)
    return a if a.ndim == 2 else None


def shape_trajectory(frames: list[dict], max_cols: int = 10, max_rows: int = 8) -> Trajectory:
    """Arrange a procedure's frames: one image per frame (prior samples, interpolation)
    as a grid; a list of images per frame (Gibbs chains) as one row per chain, one column
    per kept frame; point sets (DDPM) per frame; decoded text; forecasts as series."""
    if not frames:
        raise NodegraphError("the procedure yielded no frames")
    first = frames[0]
    if "image" in first and first["image"] and isinstance(first["image"][0][0], list):
        keep = spread(len(frames), max_cols)
        imgs = np.array([[np.asarray(frames[j]["image"][r], dtype=float) for j in keep]
                         for r in range(min(max_rows, len(first["image"])))])
        return Trajectory("images", [f"step {frames[j].get('step', j)}" for j in keep], imgs)
    if "image" in first and _image_array(first["image"]) is not None:
        imgs = np.array([np.asarray(f["image"], dtype=float) for f in frames])
        labels = [f"α {f['alpha']:.2f}" if "alpha" in f else f"#{i}" for i, f in
                  enumerate(frames)]
        return Trajectory("images", labels, imgs[None])
    if "x" in first and np.asarray(first["x"]).ndim == 2 and np.asarray(first["x"]).shape[1] == 2:
        keep = spread(len(frames), max_cols)
        return Trajectory("points", [f"t = {frames[j].get('t', j)}" for j in keep],
                          points=[np.asarray(frames[j]["x"], dtype=float) for j in keep])
    if "text" in first:
        return Trajectory("text", [str(f.get("t", i)) for i, f in enumerate(frames)],
                          text=str(frames[-1]["text"]))
    if "prediction" in first:
        series = {"prediction": [float(np.mean(f["prediction"])) for f in frames]}
        if all("target" in f for f in frames):
            series["target"] = [float(np.mean(f["target"])) for f in frames]
        return Trajectory("series", [str(f.get("t", i)) for i, f in enumerate(frames)],
                          series=series)
    raise NodegraphError(f"no view for frames with {sorted(first)}")


def spread(n: int, k: int) -> list[int]:
    """Up to k indices from 0 to n − 1, evenly spread, first and last included."""
    if n <= k:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def procedure_trajectory(compiled: Compiled, node: str, seed: int = 0, **overrides
                         ) -> Trajectory:
    """Run procedure `node` on the model's current weights and shape its frames. The
    module's train/eval mode is kept (procedures switch it to eval)."""
    from nodegraph.runtime.procedure import run_procedure

    was_training = compiled.module.training
    try:
        frames = run_procedure(compiled, node, seed=seed, **overrides)
    finally:
        compiled.module.train(was_training)
    return shape_trajectory(frames)


# -- detections ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Detections:
    """Test images with their true and predicted boxes, and how one image's true boxes were
    assigned to predictors: the grid cells responsible for them (a YOLO-style grid) or the
    queries Hungarian matching gave them (DETR)."""

    images: np.ndarray  # (K, H, W, 3) in [0, 1]
    truth: list[list[tuple[list[float], int]]]  # per image: (box, class)
    predicted: list[list[tuple[list[float], int, float]]]  # per image: (box, class, score)
    grid: int | None = None  # cells per side of the grid assignment
    cells: list[tuple[int, int, int]] | None = None  # (row, col, true box) on image 0
    matches: list[tuple[int, int, list[float]]] | None = None  # (query, true box, its box)


def boxes_source(compiled: Compiled) -> str | None:
    """The data block that emits true boxes (a detection data block), if any."""
    for name, ds in compiled.datasets.items():
        if {"boxes", "labels", "mask"} <= set(ds.ports):
            return name
    return None


def _nodes_of(compiled: Compiled, block_id: str) -> list[str]:
    return [n for n, node in compiled.graph.nodes.items() if node.type == block_id]


def _predictions(out: dict[str, torch.Tensor], min_score: float):
    """(boxes, scores, labels, keep) from a node's outputs: NMS-like ports, or a set head's
    logits (the last class 'no object')."""
    boxes = out["boxes"]
    if "scores" in out:
        scores = out["scores"]
        labels = out.get("labels", torch.zeros_like(scores, dtype=torch.long))
    else:
        scores, labels = out["logits"].softmax(-1)[..., :-1].max(-1)
    keep = scores > min_score
    if "mask" in out:
        keep &= out["mask"] > 0.5
    return boxes, scores, labels, keep


def detections(compiled: Compiled, node: str, split: str | None = None, limit: int = 6,
               min_score: float = 0.3) -> Detections:
    """Predictions of `node` (a block with a `boxes` output and scores, or a set head's
    logits) on the first `limit` images of `split`, beside the true boxes."""
    source = boxes_source(compiled)
    if source is None:
        raise NodegraphError("the graph has no detection data block (one with boxes, labels "
                             "and mask)")
    split = split or split_of(compiled, ("test", "val", "train"))
    values = data_values(compiled, split, limit)
    out = node_outputs(compiled, node, values)
    boxes, scores, labels, keep = _predictions(out, min_score)
    x = values[(source, "x")]
    images = x.permute(0, 2, 3, 1).numpy()
    images = np.repeat(images, 3, axis=3) if images.shape[3] == 1 else images[..., :3]
    gt_boxes, gt_labels = values[(source, "boxes")], values[(source, "labels")]
    gt_mask = values[(source, "mask")] > 0.5
    truth = [[(gt_boxes[i, j].tolist(), int(gt_labels[i, j]))
              for j in range(gt_boxes.shape[1]) if gt_mask[i, j]] for i in range(len(x))]
    predicted = [[(boxes[i, k].tolist(), int(labels[i, k]), float(scores[i, k]))
                  for k in torch.argsort(scores[i], descending=True).tolist() if keep[i, k]]
                 for i in range(len(x))]
    grid = cells = matches = None
    encoders = _nodes_of(compiled, "detection.GridEncode")
    encoder = compiled.module.module_of(encoders[0]) if encoders else None
    if encoders and encoder is not None:
        p = compiled.report.params[encoders[0]]  # the graph's own encoder, on one image
        t = encoder(gt_boxes[:1], gt_labels[:1], gt_mask[:1].float())
        grid = p["grid"]
        cells = []
        for j, (box, _) in enumerate(truth[0]):
            cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
            s = p["image_size"] / grid
            r, c = min(int(cy // s), grid - 1), min(int(cx // s), grid - 1)
            if t[0, r, c, 0] > 0:
                cells.append((r, c, j))
    if "logits" in out:
        losses = _nodes_of(compiled, "detection.SetLoss")
        lp = compiled.report.params[losses[0]] if losses else {}
        matcher = compiled.graph.registry.get("detection.SetMatch")  # the loss's matching
        given = {k: lp[k] for k in ("image_size", "w_class", "w_l1", "w_giou") if k in lp}
        params, _ = matcher.resolve_params(given or {"image_size": x.shape[-1]})
        args = (out["logits"][:1], boxes[:1], gt_boxes[:1], gt_labels[:1],
                gt_mask[:1].float())
        inputs = {port.name: a for port, a in zip(matcher.inputs, args, strict=True)}
        match = matcher.build(params, inputs)(*args)
        real = [j for j in range(gt_boxes.shape[1]) if gt_mask[0, j]]
        matches = [(int(match[0, j]), k, boxes[0, int(match[0, j])].tolist())
                   for k, j in enumerate(real)]
    return Detections(images, truth, predicted, grid, cells, matches)
