"""The detection heads' arithmetic: YOLO-style grid coding and loss, Hungarian set matching
and the DETR loss, and the second-stage (R-CNN) target assignment and loss.

Kept apart from the block declarations so tests and node views call the same functions the
blocks run. Shapes: a grid head's output is (N, 5 + C, S, S) channel-first, as a 1x1
convolution gives it: per cell an objectness logit, tx, ty, tw, th and C class logits; a
cell predicts the box centred at ((j + σ(tx))·s, (i + σ(ty))·s) of size
(anchor·e^tw, anchor·e^th), s = image_size / S the cell's side in pixels.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from nodes._detection_boxes import (
    box_iou,
    cxcywh_to_xyxy,
    elementwise_giou,
    encode,
    generalized_box_iou,
    xyxy_to_cxcywh,
)

MAX_LOG_SIZE = 4.0  # e^4 anchors: a bound on tw, th so an early step cannot overflow


# -- YOLO grid -----------------------------------------------------------------------------

def grid_encode(boxes: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, grid: int,
                image_size: float, anchor: float) -> torch.Tensor:
    """Per-cell targets (N, S, S, 6): objectness 0/1, ex, ey (the centre's offset in its
    cell, in [0, 1)), ew = log(w/anchor), eh = log(h/anchor), class. The cell holding a
    box's centre is responsible for it; when two centres share a cell the later box wins
    (YOLO v1 has one box per cell)."""
    n, m = labels.shape
    s = image_size / grid
    out = torch.zeros(n, grid * grid, 6, dtype=boxes.dtype, device=boxes.device)
    c = xyxy_to_cxcywh(boxes)
    j = (c[..., 0] / s).floor().clamp(0, grid - 1)
    i = (c[..., 1] / s).floor().clamp(0, grid - 1)
    values = torch.stack([torch.ones_like(j), c[..., 0] / s - j, c[..., 1] / s - i,
                          torch.log(c[..., 2].clamp(min=1e-6) / anchor),
                          torch.log(c[..., 3].clamp(min=1e-6) / anchor),
                          labels.to(boxes.dtype)], -1)
    cell = (i * grid + j).long()
    rows = torch.arange(n, device=boxes.device)
    for k in range(m):
        real = mask[:, k] > 0.5
        out[rows[real], cell[real, k]] = values[real, k]
    return out.reshape(n, grid, grid, 6)


def _cells(grid: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r = torch.arange(grid, dtype=like.dtype, device=like.device)
    return r[:, None].expand(grid, grid), r[None, :].expand(grid, grid)  # i (rows), j


def grid_boxes(t: torch.Tensor, image_size: float, anchor: float) -> torch.Tensor:
    """Pixel boxes (N, S, S, 4) of grid predictions t (N, S, S, 4) = tx, ty, tw, th."""
    grid = t.shape[1]
    s = image_size / grid
    i, j = _cells(grid, t)
    cx = (j + torch.sigmoid(t[..., 0])) * s
    cy = (i + torch.sigmoid(t[..., 1])) * s
    w = anchor * torch.exp(t[..., 2].clamp(max=MAX_LOG_SIZE))
    h = anchor * torch.exp(t[..., 3].clamp(max=MAX_LOG_SIZE))
    return cxcywh_to_xyxy(torch.stack([cx, cy, w, h], -1))


def target_boxes(target: torch.Tensor, image_size: float, anchor: float) -> torch.Tensor:
    """Pixel boxes (N, S, S, 4) of encoded targets (N, S, S, 6)."""
    grid = target.shape[1]
    s = image_size / grid
    i, j = _cells(grid, target)
    c = torch.stack([(j + target[..., 1]) * s, (i + target[..., 2]) * s,
                     anchor * torch.exp(target[..., 3]), anchor * torch.exp(target[..., 4])], -1)
    return cxcywh_to_xyxy(c)


def grid_decode(head: torch.Tensor, image_size: float, anchor: float
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Boxes (N, S·S, 4), scores (N, S·S) and labels (N, S·S) of a grid head's output:
    score = σ(objectness) · the top class probability (σ(objectness) alone without classes)."""
    n, ch, grid, _ = head.shape
    t = head.permute(0, 2, 3, 1)
    boxes = grid_boxes(t[..., 1:5], image_size, anchor).reshape(n, grid * grid, 4)
    obj = torch.sigmoid(t[..., 0]).reshape(n, -1)
    if ch > 5:
        prob, labels = torch.softmax(t[..., 5:], -1).max(-1)
        return boxes, obj * prob.reshape(n, -1), labels.reshape(n, -1)
    return boxes, obj, torch.zeros_like(obj, dtype=torch.long)


def yolo_loss(head: torch.Tensor, target: torch.Tensor, image_size: float, anchor: float,
              box_loss: str, w_obj: float, w_noobj: float, w_box: float, w_cls: float
              ) -> torch.Tensor:
    """w_obj·BCE on cells with an object + w_noobj·BCE on the others + w_box·(1 − GIoU or
    smooth-L1 on σ(tx), σ(ty), tw, th) + w_cls·CE, each summed over cells, over N."""
    n = head.shape[0]
    t = head.permute(0, 2, 3, 1)
    obj = target[..., 0]
    pos = obj > 0.5
    bce = F.binary_cross_entropy_with_logits(t[..., 0], obj, reduction="none")
    loss = w_obj * bce[pos].sum() + w_noobj * bce[~pos].sum()
    if pos.any():
        if box_loss == "giou":
            pred = grid_boxes(t[..., 1:5], image_size, anchor)[pos]
            true = target_boxes(target, image_size, anchor)[pos]
            loss = loss + w_box * (1 - elementwise_giou(pred, true)).sum()
        else:
            p = torch.cat([torch.sigmoid(t[..., 1:3]), t[..., 3:5]], -1)[pos]
            loss = loss + w_box * F.smooth_l1_loss(p, target[..., 1:5][pos], reduction="sum")
        if t.shape[-1] > 5:
            loss = loss + w_cls * F.cross_entropy(t[..., 5:][pos], target[..., 5][pos].long(),
                                                  reduction="sum")
    return loss / n


# -- Hungarian matching and the DETR set loss -----------------------------------------------

def hungarian(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The assignment of rows to columns with the least total cost (each column gets one
    row; with more rows than columns some rows stay free): scipy's linear_sum_assignment."""
    # imported here: scipy.optimize costs ~0.3 s, and every command loads this module
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(cost)
    return rows, cols


def match_cost(logits: torch.Tensor, boxes: torch.Tensor, gt_boxes: torch.Tensor,
               gt_labels: torch.Tensor, image_size: float, w_class: float, w_l1: float,
               w_giou: float) -> torch.Tensor:
    """DETR's matching cost (Q, G) for one image: −w_class·p(true class) + w_l1·L1 of the
    normalised (cx, cy, w, h) − w_giou·GIoU."""
    prob = logits.softmax(-1)[:, gt_labels]
    l1 = torch.cdist(xyxy_to_cxcywh(boxes) / image_size, xyxy_to_cxcywh(gt_boxes) / image_size,
                     p=1)
    return -w_class * prob + w_l1 * l1 - w_giou * generalized_box_iou(boxes, gt_boxes)


def set_match(logits, boxes, gt_boxes, gt_labels, gt_mask, image_size, w_class, w_l1, w_giou
              ) -> torch.Tensor:
    """For every true box (N, M), the query matched to it (−1 on padding)."""
    n, m = gt_labels.shape
    out = torch.full((n, m), -1, dtype=torch.long)
    with torch.no_grad():
        for b in range(n):
            real = torch.nonzero(gt_mask[b] > 0.5).reshape(-1)
            if len(real) == 0:
                continue
            cost = match_cost(logits[b].float(), boxes[b].float(), gt_boxes[b, real].float(),
                              gt_labels[b, real], image_size, w_class, w_l1, w_giou)
            rows, cols = hungarian(cost.cpu().numpy())
            out[b, real[cols]] = torch.as_tensor(rows, dtype=torch.long)
    return out.to(gt_labels.device)


def set_loss(logits, boxes, gt_boxes, gt_labels, gt_mask, image_size: float, w_class: float,
             w_l1: float, w_giou: float, eos_coef: float) -> torch.Tensor:
    """DETR's loss: cross-entropy over every query (the unmatched ones should say
    'no object', the last class, weighted eos_coef) + w_l1·L1 + w_giou·(1 − GIoU) of the
    matched pairs, those two summed over the true boxes and divided by their number."""
    n, q, k = logits.shape
    matched = set_match(logits, boxes, gt_boxes, gt_labels, gt_mask, image_size,
                        w_class, w_l1, w_giou)
    target = torch.full((n, q), k - 1, dtype=torch.long, device=logits.device)
    real = matched >= 0
    img = torch.arange(n, device=logits.device)[:, None].expand_as(matched)[real]
    qry = matched[real]
    target[img, qry] = gt_labels[real]
    weight = torch.ones(k, dtype=logits.dtype, device=logits.device)
    weight[-1] = eos_coef
    ce = F.cross_entropy(logits.reshape(-1, k), target.reshape(-1), weight=weight)
    count = max(int(real.sum()), 1)
    pred, true = boxes[img, qry], gt_boxes[real]
    l1 = (xyxy_to_cxcywh(pred) - xyxy_to_cxcywh(true)).abs().sum() / image_size / count
    giou = (1 - torch.diagonal(generalized_box_iou(pred, true))).sum() / count
    return w_class * ce + w_l1 * l1 + w_giou * giou


# -- second stage (R-CNN) --------------------------------------------------------------------

def assign(proposals, valid, gt_boxes, gt_labels, gt_mask, fg_iou: float, background: int
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Each proposal's class (its best-overlapping true box's, when IoU ≥ fg_iou, else
    `background`) and that true box (N, K, 4)."""
    iou = box_iou(proposals, gt_boxes)  # (N, K, M)
    iou = torch.where(gt_mask[:, None, :] > 0.5, iou, torch.full_like(iou, -1.0))
    best, which = iou.max(-1)
    cls = torch.gather(gt_labels, 1, which)
    cls = torch.where((best >= fg_iou) & valid, cls, torch.full_like(cls, background))
    box = torch.gather(gt_boxes, 1, which[..., None].expand(*which.shape, 4))
    return cls, box


def roi_head_loss(logits, deltas, proposals, valid, gt_boxes, gt_labels, gt_mask,
                  fg_iou: float, weights: tuple[float, ...], w_box: float) -> torch.Tensor:
    """Fast R-CNN's loss: cross-entropy over the valid proposals (background is the last
    class) + w_box·smooth-L1 (β = 1/9) of the deltas towards the assigned true box on the
    foreground ones, summed and divided by the number of valid proposals (torchvision's
    fastrcnn_loss, with one class-agnostic box per proposal)."""
    proposals = proposals.detach()
    k = logits.shape[-1]
    cls, box = assign(proposals, valid, gt_boxes, gt_labels, gt_mask, fg_iou, k - 1)
    count = max(int(valid.sum()), 1)
    ce = F.cross_entropy(logits[valid], cls[valid], reduction="sum") / count
    fg = valid & (cls < k - 1)
    if not fg.any():
        return ce
    target = encode(box[fg], proposals[fg], weights)
    reg = F.smooth_l1_loss(deltas[fg], target, beta=1 / 9, reduction="sum") / count
    return ce + w_box * reg
