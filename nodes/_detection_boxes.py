"""Box arithmetic for the detection blocks, in plain torch and exact to torchvision's ops.

Boxes are (x0, y0, x1, y1) in pixels, the convention of `torchvision.ops`. torchvision's
compiled kernels (`nms`, `roi_align`) do not load beside this project's CPU torch, so the
same definitions are written here over padded batches: (N, K, 4) boxes with a validity
mask instead of a list of (K_i, 4) tensors, which keeps every shape static for inference.
Each function says which torchvision definition it follows; tests check them against
brute-force loops and against torchvision where it imports.
"""

from __future__ import annotations

import torch


def box_area(b: torch.Tensor) -> torch.Tensor:
    """Area of (…, 4) boxes; torchvision.ops.box_area."""
    return (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])


def _inter_union(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    lt = torch.maximum(a[..., :, None, :2], b[..., None, :, :2])
    rb = torch.minimum(a[..., :, None, 2:], b[..., None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = box_area(a)[..., :, None] + box_area(b)[..., None, :] - inter
    return inter, union


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pairwise IoU of (…, N, 4) and (…, M, 4) boxes: (…, N, M); torchvision.ops.box_iou
    (batched over leading dims)."""
    inter, union = _inter_union(a, b)
    return inter / union


def generalized_box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pairwise GIoU = IoU − (|C| − |A∪B|)/|C|, C the smallest box holding both (Rezatofighi
    et al. 2019); torchvision.ops.generalized_box_iou, batched."""
    inter, union = _inter_union(a, b)
    iou = inter / union
    lt = torch.minimum(a[..., :, None, :2], b[..., None, :, :2])
    rb = torch.maximum(a[..., :, None, 2:], b[..., None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    hull = wh[..., 0] * wh[..., 1]
    return iou - (hull - union) / hull


def elementwise_giou(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-7) -> torch.Tensor:
    """GIoU of matching boxes a[i] and b[i] (…, 4) -> (…); the loss is 1 − GIoU
    (torchvision.ops.generalized_box_iou_loss with its eps)."""
    lt = torch.maximum(a[..., :2], b[..., :2])
    rb = torch.minimum(a[..., 2:], b[..., 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = box_area(a) + box_area(b) - inter
    iou = inter / (union + eps)
    lt = torch.minimum(a[..., :2], b[..., :2])
    rb = torch.maximum(a[..., 2:], b[..., 2:])
    wh = (rb - lt).clamp(min=0)
    hull = wh[..., 0] * wh[..., 1]
    return iou - (hull - union) / (hull + eps)


def cxcywh_to_xyxy(b: torch.Tensor) -> torch.Tensor:
    cx, cy, w, h = b.unbind(-1)
    return torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1)


def xyxy_to_cxcywh(b: torch.Tensor) -> torch.Tensor:
    x0, y0, x1, y1 = b.unbind(-1)
    return torch.stack([(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0], -1)


# -- encoding against reference boxes (Faster R-CNN's BoxCoder) ----------------------------

def encode(boxes: torch.Tensor, ref: torch.Tensor,
           weights: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)) -> torch.Tensor:
    """Deltas (dx, dy, dw, dh) that turn `ref` into `boxes`: dx = wx·(cx − cx_r)/w_r,
    dw = ww·log(w/w_r); torchvision's detection BoxCoder.encode_single."""
    c, r = xyxy_to_cxcywh(boxes), xyxy_to_cxcywh(ref)
    wx, wy, ww, wh = weights
    return torch.stack([wx * (c[..., 0] - r[..., 0]) / r[..., 2],
                        wy * (c[..., 1] - r[..., 1]) / r[..., 3],
                        ww * torch.log(c[..., 2] / r[..., 2]),
                        wh * torch.log(c[..., 3] / r[..., 3])], -1)


BBOX_CLIP = 4.135166556742356  # log(1000 / 16), torchvision's limit on dw, dh


def decode(deltas: torch.Tensor, ref: torch.Tensor,
           weights: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)) -> torch.Tensor:
    """The inverse of `encode` (BoxCoder.decode_single: dw, dh clipped at log(1000/16))."""
    r = xyxy_to_cxcywh(ref)
    wx, wy, ww, wh = weights
    dx, dy = deltas[..., 0] / wx, deltas[..., 1] / wy
    dw = (deltas[..., 2] / ww).clamp(max=BBOX_CLIP)
    dh = (deltas[..., 3] / wh).clamp(max=BBOX_CLIP)
    c = torch.stack([r[..., 0] + dx * r[..., 2], r[..., 1] + dy * r[..., 3],
                     r[..., 2] * torch.exp(dw), r[..., 3] * torch.exp(dh)], -1)
    return cxcywh_to_xyxy(c)


# -- non-maximum suppression ----------------------------------------------------------------

def nms(boxes: torch.Tensor, scores: torch.Tensor, valid: torch.Tensor, iou_threshold: float,
        labels: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy NMS over a padded batch: (N, K, 4) boxes, (N, K) scores and validity.

    Returns (order, keep): `order` (N, K) sorts each image's boxes by falling score (a stable
    sort: ties keep their input order), `keep` (N, K) marks, in that order, the boxes kept:
    a box is kept unless a kept box of higher score overlaps it with IoU > iou_threshold.
    With `labels` only boxes of one class suppress each other (torchvision.ops.batched_nms);
    without, torchvision.ops.nms. One loop over the K ranks, each step over all images.
    """
    n, k = scores.shape
    s = torch.where(valid, scores, torch.full_like(scores, -torch.inf))
    order = torch.sort(s, dim=1, descending=True, stable=True).indices
    b = torch.gather(boxes, 1, order[..., None].expand(n, k, 4))
    v = torch.gather(valid, 1, order)
    over = box_iou(b, b) > iou_threshold
    if labels is not None:
        lab = torch.gather(labels, 1, order)
        over &= lab[:, :, None] == lab[:, None, :]
    keep = torch.zeros_like(v)
    suppressed = torch.zeros_like(v)
    for i in range(k):
        kept = v[:, i] & ~suppressed[:, i]
        keep[:, i] = kept
        suppressed |= kept[:, None] & over[:, i, :]
    return order, keep


def top_kept(order: torch.Tensor, keep: torch.Tensor, limit: int) -> tuple[torch.Tensor,
                                                                          torch.Tensor]:
    """Indices into the input of the first `limit` kept boxes per image, (N, limit), and
    their mask (False where an image kept fewer)."""
    n, k = keep.shape
    rank = torch.where(keep, torch.arange(k, device=keep.device).expand(n, k),
                       torch.full_like(order, k))
    first = torch.sort(rank, dim=1).values[:, :limit]
    mask = first < k
    if first.shape[1] < limit:
        pad = limit - first.shape[1]
        first = torch.cat([first, first.new_full((n, pad), k)], 1)
        mask = torch.cat([mask, mask.new_zeros((n, pad))], 1)
    idx = torch.gather(order, 1, first.clamp(max=k - 1))
    return idx, mask


# -- pooling a feature map inside boxes ------------------------------------------------------

def _bilinear(feat: torch.Tensor, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """torchvision's roi_align bilinear_interpolate over a batch: feat (N, C, H, W), y and x
    (N, *S) -> (N, C, *S). Points outside [-1, H] x [-1, W] read 0; others clamp to the map."""
    n, c, h, w = feat.shape
    outside = (y < -1.0) | (y > h) | (x < -1.0) | (x > w)
    y = y.clamp(min=0)
    x = x.clamp(min=0)
    y0 = y.floor().long()
    x0 = x.floor().long()
    ylast = y0 >= h - 1
    xlast = x0 >= w - 1
    y0 = torch.where(ylast, h - 1, y0)
    x0 = torch.where(xlast, w - 1, x0)
    y1 = torch.where(ylast, h - 1, y0 + 1)
    x1 = torch.where(xlast, w - 1, x0 + 1)
    y = torch.where(ylast, y0.to(y.dtype), y)
    x = torch.where(xlast, x0.to(x.dtype), x)
    ly, lx = (y - y0)[:, None], (x - x0)[:, None]
    hy, hx = 1 - ly, 1 - lx
    flat = feat.reshape(n, c, h * w)
    shape = y.shape[1:]

    def at(yy, xx):
        idx = (yy * w + xx).reshape(n, 1, -1).expand(n, c, -1)
        return torch.gather(flat, 2, idx).reshape(n, c, *shape)

    out = (hy * hx) * at(y0, x0) + (hy * lx) * at(y0, x1) + (ly * hx) * at(y1, x0) \
        + (ly * lx) * at(y1, x1)
    return torch.where(outside[:, None], torch.zeros((), dtype=feat.dtype), out)


def roi_align(feat: torch.Tensor, boxes: torch.Tensor, output_size: int, spatial_scale: float,
              sampling_ratio: int, aligned: bool) -> torch.Tensor:
    """RoIAlign (He et al. 2017) as torchvision.ops.roi_align with a fixed sampling_ratio:
    feat (N, C, H, W), boxes (N, K, 4) in image pixels -> (N, K, C, P, P). Each bin averages
    sampling_ratio² bilinear samples; `aligned` shifts by half a pixel (Detectron2)."""
    n, c = feat.shape[:2]
    k, p, s = boxes.shape[1], output_size, sampling_ratio
    offset = 0.5 if aligned else 0.0
    b = boxes.detach().to(feat.dtype) * spatial_scale - offset
    x0, y0, x1, y1 = b.unbind(-1)
    rw, rh = x1 - x0, y1 - y0
    if not aligned:
        rw, rh = rw.clamp(min=1.0), rh.clamp(min=1.0)
    grid = (torch.arange(p, dtype=feat.dtype, device=feat.device)[:, None]
            + (torch.arange(s, dtype=feat.dtype, device=feat.device) + 0.5) / s)  # (P, S)
    ys = y0[..., None, None] + grid * (rh / p)[..., None, None]  # (N, K, P, S)
    xs = x0[..., None, None] + grid * (rw / p)[..., None, None]
    yy = ys[:, :, :, :, None, None].expand(n, k, p, s, p, s)
    xx = xs[:, :, None, None, :, :].expand(n, k, p, s, p, s)
    out = _bilinear(feat, yy, xx)  # (N, C, K, P, S, P, S)
    return out.mean(dim=(4, 6)).permute(0, 2, 1, 3, 4)


def _round(v: torch.Tensor) -> torch.Tensor:
    """C's round(): halves away from zero (torch.round rounds them to even)."""
    return torch.sign(v) * torch.floor(v.abs() + 0.5)


def roi_pool(feat: torch.Tensor, boxes: torch.Tensor, output_size: int,
             spatial_scale: float) -> torch.Tensor:
    """RoIPool (Fast R-CNN) as torchvision.ops.roi_pool: the max over each bin of the box
    rounded to the feature grid; an empty bin gives 0. (N, C, H, W), (N, K, 4) ->
    (N, K, C, P, P)."""
    n, c, h, w = feat.shape
    p = output_size
    b = _round(boxes.detach().to(feat.dtype) * spatial_scale)
    x0, y0, x1, y1 = b.unbind(-1)
    bw = (x1 - x0 + 1).clamp(min=1) / p
    bh = (y1 - y0 + 1).clamp(min=1) / p
    i = torch.arange(p, dtype=feat.dtype, device=feat.device)
    hs = (torch.floor(i * bh[..., None]) + y0[..., None]).clamp(0, h)  # (N, K, P)
    he = (torch.ceil((i + 1) * bh[..., None]) + y0[..., None]).clamp(0, h)
    ws = (torch.floor(i * bw[..., None]) + x0[..., None]).clamp(0, w)
    we = (torch.ceil((i + 1) * bw[..., None]) + x0[..., None]).clamp(0, w)
    rows = torch.arange(h, dtype=feat.dtype, device=feat.device)
    cols = torch.arange(w, dtype=feat.dtype, device=feat.device)
    in_h = (rows >= hs[..., None]) & (rows < he[..., None])  # (N, K, P, H)
    in_w = (cols >= ws[..., None]) & (cols < we[..., None])  # (N, K, P, W)
    inside = in_h[:, :, :, None, :, None] & in_w[:, :, None, :, None, :]  # N,K,P,P,H,W
    vals = feat[:, None, :, None, None, :, :]  # N,1,C,1,1,H,W
    masked = torch.where(inside[:, :, None], vals, torch.full((), -torch.inf, dtype=feat.dtype))
    out = masked.amax(dim=(-2, -1))
    return torch.where(torch.isinf(out), torch.zeros((), dtype=feat.dtype), out)
