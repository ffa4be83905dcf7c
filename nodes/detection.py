"""Object detection: box arithmetic, NMS, RoI pooling, grid (YOLO), two-stage (R-CNN) and
set-prediction (DETR) heads with their losses, and COCO mean average precision.

Detections and true objects travel as padded batches: boxes (N, K, 4) as x0, y0, x1, y1
in pixels, with scores, labels and a 0/1 mask (N, K) beside them, so every shape is static
(the data blocks of `nodes/data/detection.py` emit the true objects that way). The
arithmetic lives in `_detection_boxes` (torchvision.ops' definitions in plain torch),
`_detection_heads` (coding, matching, losses) and `_detection_map` (COCOeval's mAP).
"""

from __future__ import annotations

import torch
from torch import nn

from nodegraph.kinds.declare import metric, op
from nodegraph.kinds.metric import Metric
from nodegraph.model.errors import PortError
from nodegraph.model.spec import (
    LOSS_OUT,
    Param,
    Params,
    Port,
    bool_param,
    choice_param,
    float_param,
    int_param,
)
from nodegraph.model.types import BOXES
from nodes import _detection_modules as m
from nodes._detection_map import match, mean_ap
from nodes._shapes import fmt

BOX_IN = "boxes (N, K, 4): x0, y0, x1, y1 in pixels"
TRUE = [Port("target_boxes", BOXES, "true boxes (N, M, 4) from a detection data block"),
        Port("target_labels", doc="their classes (N, M)"),
        Port("target_mask", doc="1 for a real true box, 0 for padding (N, M)")]
IMAGE_SIZE = int_param("image_size", 64, "image side in pixels (boxes are in pixels)", min=1)
ANCHOR = float_param("anchor", 16.0, "the box side in pixels a grid cell's size output "
                     "scales (w = anchor·e^tw)", min=1e-3)
WEIGHTS: Param[list[float]] = Param("weights", "floats", [10.0, 10.0, 5.0, 5.0],
                                    "scales of dx, dy, dw, dh "
                                    "(torchvision's RoI heads use 10, 10, 5, 5)", min=1e-6)


def _need_boxes(x: dict, port: str) -> torch.Tensor | None:
    t = x.get(port)
    if t is not None and (t.ndim != 3 or t.shape[-1] != 4):
        raise PortError(port, f"needs boxes (N, K, 4) but receives {fmt(t.shape)}",
                        "boxes come from a detection data block, a decode block or NMS")
    return t


def _need_per_box(x: dict, port: str, boxes: str) -> None:
    t, b = x.get(port), x.get(boxes)
    if t is not None and b is not None and tuple(t.shape) != tuple(b.shape[:2]):
        raise PortError(port, f"needs one value per box {fmt(b.shape[:2])} but receives "
                        f"{fmt(t.shape)}", f"wire the '{port}' that belongs to '{boxes}'")


def _need_grid(x: dict, port: str, classes: bool = True) -> torch.Tensor:
    t = x[port]
    if t.ndim != 4 or t.shape[1] < 5 or t.shape[2] != t.shape[3]:
        raise PortError(port, f"needs a grid head's output (N, 5 + C, S, S) but receives "
                        f"{fmt(t.shape)}", "use detection.GridHead after the backbone")
    return t


def _need_truth(x: dict) -> None:
    _need_boxes(x, "target_boxes")
    _need_per_box(x, "target_labels", "target_boxes")
    _need_per_box(x, "target_mask", "target_boxes")


# -- builders ------------------------------------------------------------------------------

class BoxIoUParams(Params):
    kind: str


def _box_iou(p: BoxIoUParams, x):
    _need_boxes(x, "a")
    _need_boxes(x, "b")
    return m.BoxIoU(p.kind)


def _encode(cls):
    def build(p, x):
        first = "boxes" if "boxes" in x else "deltas"
        _need_boxes(x, first)
        _need_boxes(x, "reference")
        weights = p.typed(WEIGHTS)  # a list[float], for the type checker too
        if len(weights) != 4:
            raise PortError(first, f"'weights' needs 4 numbers, got {len(weights)}")
        return cls(weights)
    return build


class GridEncodeParams(Params):
    grid: int
    image_size: int
    anchor: float


def _grid_encode(p: GridEncodeParams, x):
    _need_boxes(x, "boxes")
    _need_per_box(x, "labels", "boxes")
    _need_per_box(x, "mask", "boxes")
    return m.GridEncode(p.grid, p.image_size, p.typed(ANCHOR))


class GridDecodeParams(Params):
    image_size: int
    anchor: float


def _grid_decode(p: GridDecodeParams, x):
    _need_grid(x, "input")
    return m.GridDecode(p.image_size, p.typed(ANCHOR))


class YOLOLossParams(Params):
    box_loss: str
    w_obj: float
    w_noobj: float
    w_box: float
    w_cls: float
    image_size: int
    anchor: float


def _yolo_loss(p: YOLOLossParams, x):
    head = _need_grid(x, "input")
    t = x["target"]
    if tuple(t.shape) != (head.shape[0], head.shape[2], head.shape[3], 6):
        raise PortError("target", f"needs grid targets (N, {head.shape[2]}, {head.shape[3]}, "
                        f"6) for a {head.shape[2]}x{head.shape[3]} head but receives "
                        f"{fmt(t.shape)}", "set detection.GridEncode's grid to the head's "
                        "grid size")
    return m.YOLOLoss(p.image_size, p.anchor, p.box_loss, p.w_obj, p.w_noobj, p.w_box,
                      p.w_cls)


class GridHeadParams(Params):
    num_classes: int


def _grid_head(p: GridHeadParams, x):
    t = x["input"]
    if t.ndim != 4:
        raise PortError("input", f"needs feature maps (N, C, S, S) but receives "
                        f"{fmt(t.shape)}", "put a convolutional backbone before it")
    return nn.Conv2d(t.shape[1], 5 + p.num_classes, 1)


class NMSParams(Params):
    iou_threshold: float
    score_threshold: float
    max_detections: int
    class_aware: bool


def _nms(p: NMSParams, x):
    _need_boxes(x, "boxes")
    _need_per_box(x, "scores", "boxes")
    _need_per_box(x, "labels", "boxes")
    _need_per_box(x, "mask", "boxes")
    return m.NMS(p.iou_threshold, p.score_threshold, p.max_detections, p.class_aware)


def _roi(cls, *names):
    def build(p, x):
        f = x["features"]
        if f.ndim != 4:
            raise PortError("features", f"needs feature maps (N, C, H, W) but receives "
                            f"{fmt(f.shape)}")
        b = x["boxes"]
        _need_boxes(x, "boxes")
        if b.shape[0] != f.shape[0]:
            raise PortError("boxes", f"has {b.shape[0]} images but 'features' has "
                            f"{f.shape[0]}")
        return cls(*[p[n] for n in names])
    return build


class ClassScoresParams(Params):
    background: bool


def _class_scores(p: ClassScoresParams, x):
    if x["logits"].ndim < 2:
        raise PortError("logits", f"needs class scores (N, K, C) but receives "
                        f"{fmt(x['logits'].shape)}")
    return m.ClassScores(p.background)


class RoIHeadLossParams(Params):
    fg_iou: float
    weights: list[float]
    w_box: float


def _roi_head_loss(p: RoIHeadLossParams, x):
    _need_boxes(x, "proposals")
    if x["logits"].ndim != 3 or x["logits"].shape[:2] != x["proposals"].shape[:2]:
        raise PortError("logits", f"needs class logits per proposal (N, K, C + 1) for "
                        f"{fmt(x['proposals'].shape)} proposals but receives "
                        f"{fmt(x['logits'].shape)}")
    _need_per_box(x, "proposal_mask", "proposals")
    _need_truth(x)
    if tuple(x["deltas"].shape) != tuple(x["proposals"].shape):
        raise PortError("deltas", f"needs one (dx, dy, dw, dh) per proposal "
                        f"{fmt(x['proposals'].shape)} but receives {fmt(x['deltas'].shape)}")
    weights = p.typed(WEIGHTS)
    if len(weights) != 4:
        raise PortError("deltas", f"'weights' needs 4 numbers, got {len(weights)}")
    return m.RoIHeadLoss(p.fg_iou, weights, p.w_box)


def _need_set(x: dict) -> None:
    _need_boxes(x, "boxes")
    _need_truth(x)
    if x["logits"].shape[:2] != x["boxes"].shape[:2]:
        raise PortError("logits", f"needs one row of class scores per query "
                        f"{fmt(x['boxes'].shape[:2])} but receives {fmt(x['logits'].shape)}")


class SetLossParams(Params):
    w_class: float
    w_l1: float
    w_giou: float
    eos_coef: float
    image_size: int


def _set_loss(p: SetLossParams, x):
    _need_set(x)
    return m.SetLoss(p.image_size, p.w_class, p.w_l1, p.w_giou, p.eos_coef)


class SetMatchParams(Params):
    w_class: float
    w_l1: float
    w_giou: float
    image_size: int


def _set_match(p: SetMatchParams, x):
    _need_set(x)
    return m.SetMatch(p.image_size, p.w_class, p.w_l1, p.w_giou)


class DETRHeadParams(Params):
    num_queries: int
    num_classes: int
    d_model: int
    nhead: int
    num_encoder_layers: int
    num_decoder_layers: int
    dim_feedforward: int
    image_size: int


def _detr_head(p: DETRHeadParams, x):
    f = x["features"]
    if f.ndim != 4:
        raise PortError("features", f"needs feature maps (N, C, H, W) but receives "
                        f"{fmt(f.shape)}", "put a convolutional backbone before it")
    if p.d_model % p.nhead:
        raise PortError("features", f"d_model ({p.d_model}) must be a multiple of nhead "
                        f"({p.nhead})")
    return m.DETRHead(f.shape[1], (f.shape[2], f.shape[3]), p.num_queries, p.num_classes,
                      p.d_model, p.nhead, p.num_encoder_layers, p.num_decoder_layers,
                      p.dim_feedforward, p.image_size)


# -- the metric ------------------------------------------------------------------------------

class MeanAP(Metric):
    """COCO mAP over a split: each batch is matched as it comes (on the CPU), the
    precision-recall curves are computed once over the split."""

    def __init__(self, max_dets: int):
        self.max_dets = max_dets
        self.reset()

    def reset(self) -> None:
        self.parts: list[tuple] = []
        self.counts: dict[int, int] = {}

    def update(self, boxes, scores, labels, mask, target_boxes, target_labels,
               target_mask) -> None:
        valid = (torch.ones_like(scores, dtype=torch.bool) if mask is None else mask > 0.5)
        image, lab, sc, hit, counts = match(
            boxes.detach().cpu(), scores.detach().cpu(), labels.cpu(), valid.cpu(),
            target_boxes.cpu(), target_labels.cpu(), target_mask.cpu() > 0.5,
            max_dets=self.max_dets)
        self.parts.append((image, lab, sc, hit))
        for c, k in counts.items():
            self.counts[c] = self.counts.get(c, 0) + k

    def compute(self) -> dict[str, object]:
        return {**mean_ap(self.parts, self.counts)}


class MeanAPParams(Params):
    max_dets: int


def _mean_ap(p: MeanAPParams, x):
    _need_boxes(x, "boxes")
    _need_per_box(x, "scores", "boxes")
    _need_per_box(x, "labels", "boxes")
    _need_per_box(x, "mask", "boxes")
    _need_truth(x)
    return MeanAP(p.max_dets)


# -- declarations ----------------------------------------------------------------------------

DETECTIONS = [Port("boxes", BOXES, "the kept boxes (N, D, 4), zeros on padding"),
              Port("scores", doc="their scores (N, D), 0 on padding"),
              Port("labels", doc="their classes (N, D), −1 on padding"),
              Port("mask", doc="1 for a kept box, 0 for padding (N, D)")]
LOSS_WEIGHT = "weight of the {} term"

BLOCKS = [
    op("detection.BoxIoU",
       "Pairwise IoU (or GIoU) of two sets of boxes per image.\n\n"
       "IoU = area(A∩B)/area(A∪B); GIoU subtracts the share of the smallest box around "
       "both that neither covers, so it still ranks boxes that do not overlap (−1 to 1). "
       "torchvision.ops.box_iou / generalized_box_iou, batched over images.",
       _box_iou, inputs=[Port("a", doc=BOX_IN), Port("b", doc="boxes (N, M, 4)")],
       outputs=[Port("output", doc="IoU per pair (N, K, M)")],
       params=[choice_param("kind", ("iou", "giou"), "iou", "plain or generalized IoU")],
       keywords=("intersection over union", "giou", "overlap", "jaccard")),
    op("detection.BoxEncode",
       "Boxes as offsets from reference boxes (anchors, proposals): Faster R-CNN's deltas."
       "\n\ndx = wx·(cx − cx_ref)/w_ref, dy likewise, dw = ww·log(w/w_ref), dh likewise; "
       "the regression target of a box head.",
       _encode(m.BoxEncode),
       inputs=[Port("boxes", BOXES, BOX_IN), Port("reference", BOXES, "reference boxes, "
                                                  "same shape")],
       outputs=[Port("output", doc="deltas (N, K, 4)")], params=[WEIGHTS],
       keywords=("anchors", "deltas", "box coder", "regression")),
    op("detection.BoxDecode",
       "Boxes from predicted offsets against reference boxes: the inverse of BoxEncode.\n\n"
       "dw and dh are clipped at log(1000/16) as in torchvision. No gradient flows into "
       "the reference boxes.",
       _encode(m.BoxDecode),
       inputs=[Port("deltas", doc="(dx, dy, dw, dh) per box (N, K, 4)"),
               Port("reference", BOXES, "the reference boxes (N, K, 4)")],
       outputs=[Port("output", BOXES, "decoded boxes (N, K, 4)")], params=[WEIGHTS],
       keywords=("anchors", "deltas", "box coder", "proposals")),
    op("detection.GridHead",
       "A YOLO-style head: a 1x1 convolution giving each grid cell 5 + C numbers.\n\n"
       "Per cell: an objectness logit, tx, ty, tw, th, and C class logits; the grid is "
       "the feature map's (S x S). With num_classes 0 it is a class-agnostic region "
       "proposal head.",
       _grid_head, inputs=[Port("input", doc="feature maps (N, C, S, S)")],
       outputs=[Port("output", doc="per-cell predictions (N, 5 + C, S, S)")],
       params=[int_param("num_classes", 3, "object classes (0: objectness only)", min=0)],
       keywords=("yolo", "single stage", "anchor", "rpn")),
    op("detection.GridEncode",
       "True boxes as per-cell targets of a grid head (the YOLO assignment).\n\n"
       "The cell holding a box's centre is responsible for it: objectness 1, the centre's "
       "offset in the cell (ex, ey), log(w/anchor), log(h/anchor) and the class; other "
       "cells have objectness 0. Two centres in one cell: the later box wins.",
       _grid_encode,
       inputs=[Port("boxes", BOXES, "true boxes (N, M, 4)"),
               Port("labels", doc="their classes (N, M)"),
               Port("mask", doc="1 for a real box (N, M)")],
       outputs=[Port("output", doc="targets (N, S, S, 6): obj, ex, ey, ew, eh, class")],
       params=[int_param("grid", 8, "cells per side (the head's S)", min=1), IMAGE_SIZE,
               ANCHOR],
       keywords=("yolo", "assignment", "targets", "encode")),
    op("detection.GridDecode",
       "A grid head's output as boxes, scores and classes, one per cell.\n\n"
       "Box centre ((j + σ(tx))·s, (i + σ(ty))·s), size anchor·(e^tw, e^th), s the cell "
       "side; score σ(objectness) times the top class probability. Feed NMS.",
       _grid_decode, inputs=[Port("input", doc="a grid head's output (N, 5 + C, S, S)")],
       outputs=[Port("boxes", BOXES, "one box per cell (N, S·S, 4)"),
                Port("scores", doc="(N, S·S)"), Port("labels", doc="(N, S·S)")],
       params=[IMAGE_SIZE, ANCHOR],
       keywords=("yolo", "decode", "predictions")),
    op("detection.YOLOLoss",
       "The loss of a grid detector: objectness BCE, box regression and class CE.\n\n"
       "w_obj·BCE on cells with an object + w_noobj·BCE on the rest + w_box·(1 − GIoU, or "
       "smooth-L1 on σ(tx), σ(ty), tw, th) + w_cls·CE on cells with an object; summed "
       "over cells, averaged over images. image_size and anchor must be GridEncode's.",
       _yolo_loss,
       inputs=[Port("input", doc="the grid head's output (N, 5 + C, S, S)"),
               Port("target", doc="GridEncode's targets (N, S, S, 6)")],
       outputs=[LOSS_OUT],
       params=[choice_param("box_loss", ("giou", "smooth_l1"), "giou",
                            "1 − GIoU of the decoded boxes, or smooth-L1 of the codes"),
               float_param("w_obj", 1.0, LOSS_WEIGHT.format("objectness (object cells)"),
                           min=0),
               float_param("w_noobj", 0.5, LOSS_WEIGHT.format("objectness (empty cells)"),
                           min=0),
               float_param("w_box", 5.0, LOSS_WEIGHT.format("box"), min=0),
               float_param("w_cls", 1.0, LOSS_WEIGHT.format("class"), min=0),
               IMAGE_SIZE, ANCHOR],
       keywords=("yolo", "objectness", "giou", "smooth l1", "detection loss")),
    op("detection.NMS",
       "Non-maximum suppression: keep the best box of each cluster of overlapping ones.\n\n"
       "Boxes scoring above score_threshold, in falling score order, are kept unless a "
       "kept box overlaps them with IoU > iou_threshold (of the same class when "
       "class_aware: torchvision's batched_nms; else nms); the first max_detections "
       "per image are returned, padded.",
       _nms,
       inputs=[Port("boxes", BOXES, BOX_IN), Port("scores", doc="(N, K)"),
               Port("labels", doc="(N, K) classes, for class_aware", optional=True),
               Port("mask", doc="(N, K) 1 for a real box (padding is never kept)",
                    optional=True)],
       outputs=DETECTIONS,
       params=[float_param("iou_threshold", 0.5, "suppress boxes overlapping a kept one "
                           "more than this", min=0, max=1),
               float_param("score_threshold", 0.05, "drop boxes scoring this or less",
                           min=0),
               int_param("max_detections", 10, "boxes kept per image (the output's D)",
                         min=1),
               bool_param("class_aware", True, "only boxes of one class suppress each "
                          "other")],
       keywords=("nms", "suppression", "postprocess", "batched_nms")),
    op("detection.RoIAlign",
       "Features inside each box, bilinearly sampled onto a P x P grid (Mask R-CNN).\n\n"
       "Each bin averages sampling_ratio² samples; `aligned` shifts by half a pixel. "
       "torchvision.ops.roi_align. Gradients reach the features, not the boxes.",
       _roi(m.RoIAlign, "output_size", "spatial_scale", "sampling_ratio", "aligned"),
       inputs=[Port("features", doc="feature maps (N, C, H, W)"),
               Port("boxes", BOXES, "regions (N, K, 4) in image pixels")],
       outputs=[Port("output", doc="(N, K, C, P, P)")],
       params=[int_param("output_size", 4, "P: bins per side", min=1),
               float_param("spatial_scale", 0.25, "feature-map pixels per image pixel "
                           "(1/stride of the backbone)", min=1e-6),
               int_param("sampling_ratio", 2, "samples per bin side", min=1),
               bool_param("aligned", True, "pixel centres at +0.5 (Detectron2's "
                          "correction)")],
       keywords=("roi", "r-cnn", "mask r-cnn", "region", "crop")),
    op("detection.RoIPool",
       "The maximum of the features in each bin of each box (Fast R-CNN).\n\n"
       "Boxes are rounded to the feature grid, as torchvision.ops.roi_pool; an empty bin "
       "gives 0. RoIAlign is usually better; this is the original.",
       _roi(m.RoIPool, "output_size", "spatial_scale"),
       inputs=[Port("features", doc="feature maps (N, C, H, W)"),
               Port("boxes", BOXES, "regions (N, K, 4) in image pixels")],
       outputs=[Port("output", doc="(N, K, C, P, P)")],
       params=[int_param("output_size", 4, "P: bins per side", min=1),
               float_param("spatial_scale", 0.25, "feature-map pixels per image pixel",
                           min=1e-6)],
       keywords=("roi", "fast r-cnn", "region", "max pool")),
    op("detection.ClassScores",
       "The top class and its probability per box, from class logits.\n\n"
       "With `background` the last class means 'no object' (R-CNN's background, DETR's "
       "∅) and is left out of the choice.",
       _class_scores, inputs=[Port("logits", doc="class scores (N, K, C)")],
       outputs=[Port("scores", doc="(N, K)"), Port("labels", doc="(N, K)")],
       params=[bool_param("background", True, "the last class is 'no object'")],
       keywords=("softmax", "argmax", "postprocess")),
    op("detection.RoIHeadLoss",
       "The second-stage loss of a two-stage (R-CNN) detector.\n\n"
       "Each proposal takes the class of the true box it overlaps most when IoU ≥ fg_iou, "
       "else background (the last class); loss = CE over valid proposals + w_box·"
       "smooth-L1 of the deltas towards the assigned true box (BoxEncode with "
       "`weights`) on the foreground ones, over the number of valid proposals.",
       _roi_head_loss,
       inputs=[Port("logits", doc="class logits per proposal (N, K, C + 1)"),
               Port("deltas", doc="box deltas per proposal (N, K, 4)"),
               Port("proposals", BOXES, "the proposals (N, K, 4)"),
               Port("proposal_mask", doc="1 for a real proposal (N, K)", optional=True),
               Port("boxes", BOXES, "true boxes (N, M, 4)"),
               Port("labels", doc="their classes (N, M)"),
               Port("mask", doc="1 for a real true box (N, M)")],
       outputs=[LOSS_OUT],
       params=[float_param("fg_iou", 0.5, "IoU from which a proposal is foreground",
                           min=0, max=1),
               WEIGHTS, float_param("w_box", 1.0, LOSS_WEIGHT.format("box"), min=0)],
       keywords=("r-cnn", "fast r-cnn", "two stage", "proposals", "roi head")),
    op("detection.DETRHead",
       "A small DETR: a transformer whose learned queries each predict one object.\n\n"
       "Features become tokens (1x1 projection plus DETR's 2-D sine position of each "
       "cell), pass "
       "an encoder, and the decoder's queries attend to them; each query gives class "
       "logits (the last is 'no object') and a box. Train with SetLoss.",
       _detr_head, inputs=[Port("features", doc="feature maps (N, C, H, W)")],
       outputs=[Port("logits", doc="(N, Q, C + 1)"),
                Port("boxes", BOXES, "(N, Q, 4) in pixels")],
       params=[int_param("num_queries", 8, "Q: most objects it can report", min=1),
               int_param("num_classes", 3, "object classes", min=1),
               int_param("d_model", 64, "token width", min=1),
               int_param("nhead", 4, "attention heads", min=1),
               int_param("num_encoder_layers", 1, "encoder layers", min=0),
               int_param("num_decoder_layers", 2, "decoder layers", min=1),
               int_param("dim_feedforward", 128, "width of the feed-forward layers",
                         min=1),
               IMAGE_SIZE],
       keywords=("detr", "transformer", "set prediction", "queries")),
    op("detection.SetLoss",
       "DETR's set loss: Hungarian matching of queries to true boxes, then CE + L1 + "
       "GIoU.\n\n"
       "Matching minimises −w_class·p(class) + w_l1·L1 + −w_giou·GIoU (scipy's "
       "linear_sum_assignment); unmatched queries learn 'no object' (weight eos_coef). "
       "L1 is on (cx, cy, w, h) over image_size.",
       _set_loss,
       inputs=[Port("logits", doc="(N, Q, C + 1)"), Port("boxes", BOXES, "(N, Q, 4)"),
               *TRUE], outputs=[LOSS_OUT],
       params=[float_param("w_class", 1.0, LOSS_WEIGHT.format("class"), min=0),
               float_param("w_l1", 5.0, LOSS_WEIGHT.format("L1 box"), min=0),
               float_param("w_giou", 2.0, LOSS_WEIGHT.format("GIoU"), min=0),
               float_param("eos_coef", 0.1, "class weight of 'no object'", min=0),
               IMAGE_SIZE],
       keywords=("detr", "hungarian", "bipartite", "matching", "set prediction")),
    op("detection.SetMatch",
       "The Hungarian matching of SetLoss, as data: which query each true box got.\n\n"
       "For looking at what DETR learns (the node view draws it).",
       _set_match,
       inputs=[Port("logits", doc="(N, Q, C + 1)"), Port("boxes", BOXES, "(N, Q, 4)"),
               *TRUE],
       outputs=[Port("output", doc="the query matched to each true box (N, M), −1 on "
                     "padding")],
       params=[float_param("w_class", 1.0, "cost weight of the class"),
               float_param("w_l1", 5.0, "cost weight of L1"),
               float_param("w_giou", 2.0, "cost weight of GIoU"), IMAGE_SIZE],
       keywords=("detr", "hungarian", "assignment")),
    metric("detection.MeanAP",
           "COCO mean average precision of detections: mAP@0.5, @0.75 and @[.5:.95].\n\n"
           "pycocotools' COCOeval for boxes (101-point interpolated AP per class, averaged "
           "over classes with true boxes), reported as map_50, map_75 and map; it agrees with "
           "torchmetrics' MeanAveragePrecision.",
           _mean_ap,
           inputs=[Port("boxes", BOXES, "detected boxes (N, D, 4)"),
                   Port("scores", doc="(N, D)"), Port("labels", doc="(N, D)"),
                   Port("mask", doc="1 for a real detection (N, D)", optional=True), *TRUE],
           params=[int_param("max_dets", 100, "detections per image and class counted (COCO's "
                             "maxDets)", min=1)],
           keywords=("map", "average precision", "coco", "detection metric")),
]
