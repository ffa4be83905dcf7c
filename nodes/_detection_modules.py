"""The torch modules the detection blocks build (declarations in `nodes/detection.py`).

Modules whose work depends on the values (NMS, matching, losses) answer meta inputs with
empty outputs of the right shape, so validation infers shapes without running them.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from nodes._detection_boxes import (
    box_iou,
    cxcywh_to_xyxy,
    decode,
    encode,
    generalized_box_iou,
    nms,
    roi_align,
    roi_pool,
    top_kept,
)
from nodes._detection_heads import (
    grid_decode,
    grid_encode,
    roi_head_loss,
    set_loss,
    set_match,
    yolo_loss,
)


def _meta(*tensors: torch.Tensor | None) -> bool:
    return any(t is not None and t.is_meta for t in tensors)


def _valid(mask: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    if mask is None:
        return torch.ones(like.shape[:2], dtype=torch.bool, device=like.device)
    return mask > 0.5


class BoxIoU(nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def forward(self, a, b):
        f = generalized_box_iou if self.kind == "giou" else box_iou
        return f(a, b)


class BoxEncode(nn.Module):
    def __init__(self, weights):
        super().__init__()
        self.weights = tuple(weights)

    def forward(self, boxes, reference):
        return encode(boxes, reference, self.weights)


class BoxDecode(BoxEncode):
    def forward(self, deltas, reference):
        return decode(deltas, reference.detach(), self.weights)


class GridEncode(nn.Module):
    def __init__(self, grid: int, image_size: float, anchor: float):
        super().__init__()
        self.grid, self.image_size, self.anchor = grid, image_size, anchor

    def forward(self, boxes, labels, mask):
        if _meta(boxes):
            return torch.empty(boxes.shape[0], self.grid, self.grid, 6, device="meta")
        return grid_encode(boxes, labels, mask, self.grid, self.image_size, self.anchor)


class GridDecode(nn.Module):
    def __init__(self, image_size: float, anchor: float):
        super().__init__()
        self.image_size, self.anchor = image_size, anchor

    def forward(self, head):
        return grid_decode(head, self.image_size, self.anchor)


class YOLOLoss(nn.Module):
    def __init__(self, image_size: float, anchor: float, box_loss: str, w_obj: float,
                 w_noobj: float, w_box: float, w_cls: float):
        super().__init__()
        self.p: dict[str, Any] = dict(image_size=image_size, anchor=anchor, box_loss=box_loss,
                                      w_obj=w_obj, w_noobj=w_noobj, w_box=w_box, w_cls=w_cls)

    def forward(self, head, target):
        if _meta(head):
            return torch.empty((), device="meta")
        return yolo_loss(head, target, **self.p)


class NMS(nn.Module):
    def __init__(self, iou_threshold: float, score_threshold: float, max_detections: int,
                 class_aware: bool):
        super().__init__()
        self.iou, self.min_score = iou_threshold, score_threshold
        self.limit, self.class_aware = max_detections, class_aware

    def forward(self, boxes, scores, labels=None, mask=None):
        n = boxes.shape[0]
        if labels is None:
            labels = torch.zeros(scores.shape, dtype=torch.long, device=scores.device)
        if _meta(boxes):
            d = self.limit
            return (torch.empty(n, d, 4, device="meta"), torch.empty(n, d, device="meta"),
                    torch.empty(n, d, dtype=torch.long, device="meta"),
                    torch.empty(n, d, device="meta"))
        valid = scores > self.min_score
        if mask is not None:
            valid &= mask > 0.5
        order, keep = nms(boxes.detach(), scores.detach(), valid, self.iou,
                             labels if self.class_aware else None)
        idx, mask = top_kept(order, keep, self.limit)
        out_boxes = torch.gather(boxes, 1, idx[..., None].expand(*idx.shape, 4))
        out_scores = torch.gather(scores, 1, idx)
        out_labels = torch.gather(labels, 1, idx)
        zero = mask.logical_not()
        return (out_boxes.masked_fill(zero[..., None], 0.0), out_scores.masked_fill(zero, 0.0),
                out_labels.masked_fill(zero, -1), mask.to(boxes.dtype))


def _pooled_on_meta(features, boxes, size: int) -> torch.Tensor:
    """What RoIAlign/RoIPool give while validating: (N, boxes, C, size, size) on meta."""
    return torch.empty(features.shape[0], boxes.shape[1], features.shape[1], size, size,
                       dtype=features.dtype, device="meta")


class RoIAlign(nn.Module):
    def __init__(self, output_size: int, spatial_scale: float, sampling_ratio: int,
                 aligned: bool):
        super().__init__()
        self.args = (output_size, spatial_scale, sampling_ratio, aligned)

    def forward(self, features, boxes):
        if _meta(features, boxes):
            return _pooled_on_meta(features, boxes, self.args[0])
        return roi_align(features, boxes, *self.args)


class RoIPool(nn.Module):
    def __init__(self, output_size: int, spatial_scale: float):
        super().__init__()
        self.args = (output_size, spatial_scale)

    def forward(self, features, boxes):
        if _meta(features, boxes):
            return _pooled_on_meta(features, boxes, self.args[0])
        return roi_pool(features, boxes, *self.args)


class ClassScores(nn.Module):
    def __init__(self, background: bool):
        super().__init__()
        self.background = background

    def forward(self, logits):
        prob = logits.softmax(-1)
        if self.background:
            prob = prob[..., :-1]
        scores, labels = prob.max(-1)
        return scores, labels


class RoIHeadLoss(nn.Module):
    def __init__(self, fg_iou: float, weights, w_box: float):
        super().__init__()
        self.fg_iou, self.weights, self.w_box = fg_iou, tuple(weights), w_box

    def forward(self, logits, deltas, proposals, proposal_mask, boxes, labels, mask):
        if _meta(logits):
            return torch.empty((), device="meta")
        return roi_head_loss(logits, deltas, proposals, _valid(proposal_mask, proposals),
                                boxes, labels, mask, self.fg_iou, self.weights, self.w_box)


class SetLoss(nn.Module):
    def __init__(self, image_size: float, w_class: float, w_l1: float, w_giou: float,
                 eos_coef: float):
        super().__init__()
        self.p = dict(image_size=image_size, w_class=w_class, w_l1=w_l1, w_giou=w_giou)
        self.eos_coef = eos_coef

    def forward(self, logits, boxes, gt_boxes, gt_labels, gt_mask):
        if _meta(logits):
            return torch.empty((), device="meta")
        return set_loss(logits, boxes, gt_boxes, gt_labels, gt_mask, **self.p,
                           eos_coef=self.eos_coef)


class SetMatch(nn.Module):
    def __init__(self, image_size: float, w_class: float, w_l1: float, w_giou: float):
        super().__init__()
        self.p = dict(image_size=image_size, w_class=w_class, w_l1=w_l1, w_giou=w_giou)

    def forward(self, logits, boxes, gt_boxes, gt_labels, gt_mask):
        if _meta(logits):
            return torch.empty(gt_labels.shape, dtype=torch.long, device="meta")
        return set_match(logits, boxes, gt_boxes, gt_labels, gt_mask, **self.p)


def sine_positions(h: int, w: int, d: int, temperature: float = 10000.0) -> torch.Tensor:
    """DETR's 2-D sine position embedding (H·W, d): the first d/2 features encode the row,
    the rest the column, each as sin/cos pairs of (index + 1)/size·2π at falling
    frequencies."""
    half = d // 2
    freq = temperature ** (2 * (torch.arange(half) // 2) / half)

    def encode(pos: torch.Tensor) -> torch.Tensor:
        a = pos[:, None] / freq
        return torch.stack([a[:, 0::2].sin(), a[:, 1::2].cos()], -1).flatten(1)

    ys = encode((torch.arange(h) + 1.0) / h * 2 * torch.pi)  # (H, half)
    xs = encode((torch.arange(w) + 1.0) / w * 2 * torch.pi)  # (W, half)
    grid = torch.cat([ys[:, None, :].expand(h, w, half), xs[None, :, :].expand(h, w, half)], -1)
    out = torch.zeros(h, w, d)
    out[..., :2 * half] = grid
    return out.reshape(h * w, d)


class DETRHead(nn.Module):
    """A small DETR: features projected to tokens plus DETR's fixed 2-D sine position of
    each cell, a transformer encoder over them, and a decoder whose learned queries each predict one
    box (sigmoid cx, cy, w, h times the image size) and a class, the last 'no object'."""

    pos: torch.Tensor  # a buffer

    def __init__(self, channels: int, cells: tuple[int, int], num_queries: int,
                 num_classes: int, d_model: int, nhead: int, num_encoder_layers: int,
                 num_decoder_layers: int, dim_feedforward: int, image_size: float):
        super().__init__()
        d = d_model
        self.image_size = image_size
        self.proj = nn.Conv2d(channels, d, 1)
        self.register_buffer("pos", sine_positions(*cells, d), persistent=False)
        self.queries = nn.Parameter(torch.randn(num_queries, d))
        enc = nn.TransformerEncoderLayer(d, nhead, dim_feedforward, dropout=0.0,
                                         batch_first=True)
        dec = nn.TransformerDecoderLayer(d, nhead, dim_feedforward, dropout=0.0,
                                         batch_first=True)
        self.encoder = nn.TransformerEncoder(enc, num_encoder_layers,
                                             enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec, num_decoder_layers)
        self.classes = nn.Linear(d, num_classes + 1)
        self.box = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 4))

    def forward(self, features):
        tokens = self.proj(features).flatten(2).transpose(1, 2) + self.pos
        memory = self.encoder(tokens)
        q = self.queries.expand(features.shape[0], -1, -1)
        h = self.decoder(q, memory)
        boxes = cxcywh_to_xyxy(torch.sigmoid(self.box(h)) * self.image_size)
        return self.classes(h), boxes
