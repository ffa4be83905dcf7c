"""Detection blocks: box ops, NMS and RoI pooling against brute-force transcriptions of
torchvision's definitions (and torchvision itself where it imports), Hungarian matching
against all permutations, mAP against pycocotools' COCOeval (torchmetrics' backend), the
heads' coding and losses against their formulas, and the detection data blocks."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch

import nodegraph
from nodegraph.model.errors import PortError
from nodegraph.model.packages import load_torchvision
from nodes import _detection_boxes as bx
from nodes import _detection_heads as hd
from nodes._detection_data import shapes
from tests.blockcheck import build, run_op

torch.manual_seed(0)


def random_boxes(*shape: int, size: float = 64.0, gen=None) -> torch.Tensor:
    xy = torch.rand(*shape, 2, generator=gen, dtype=torch.float64) * size * 0.8
    wh = 1 + torch.rand(*shape, 2, generator=gen, dtype=torch.float64) * size * 0.4
    return torch.cat([xy, xy + wh], -1)


def iou_one(a, b) -> float:
    """IoU of two boxes, written out."""
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union


def giou_one(a, b) -> float:
    hull = (max(a[2], b[2]) - min(a[0], b[0])) * (max(a[3], b[3]) - min(a[1], b[1]))
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h
    return iou_one(a, b) - (hull - union) / hull


def torchvision_ops():
    try:
        load_torchvision()  # beside a CPU torch, the CUDA wheel needs its op schemas declared
        from torchvision import ops
    except Exception as e:  # the CUDA wheel's compiled ops fail to register beside CPU torch
        pytest.skip(f"torchvision does not import here ({type(e).__name__}: "
                    f"{str(e).splitlines()[0][:80]})")
    return ops


# -- box ops ----------------------------------------------------------------------------------

def test_box_iou_and_giou_against_the_definitions():
    a, b = random_boxes(2, 5), random_boxes(2, 4)
    b[0, 0] = a[0, 0]  # identical boxes: IoU 1
    b[1, 1] = torch.tensor([200.0, 200, 210, 210], dtype=torch.float64)  # disjoint
    iou = run_op("detection.BoxIoU", {"a": a, "b": b})
    giou = run_op("detection.BoxIoU", {"a": a, "b": b}, kind="giou")
    assert iou.shape == (2, 5, 4)
    for n, i, j in itertools.product(range(2), range(5), range(4)):
        assert iou[n, i, j].item() == pytest.approx(iou_one(a[n, i].tolist(), b[n, j].tolist()))
        assert giou[n, i, j].item() == pytest.approx(giou_one(a[n, i].tolist(),
                                                              b[n, j].tolist()))
    assert iou[0, 0, 0] == 1 and iou[1, :, 1].eq(0).all() and (giou[1, :, 1] < 0).all()
    pair = bx.elementwise_giou(a[0, :4], b[0])
    assert torch.allclose(pair, torch.diagonal(giou[0, :4]), atol=1e-6)


def test_box_ops_agree_with_torchvision():
    ops = torchvision_ops()
    a, b = random_boxes(7).float(), random_boxes(5).float()
    assert torch.allclose(bx.box_iou(a, b), ops.box_iou(a, b))
    assert torch.allclose(bx.generalized_box_iou(a, b), ops.generalized_box_iou(a, b))


def test_encode_decode_against_the_formula_and_each_other():
    boxes, ref = random_boxes(3, 6), random_boxes(3, 6)
    w = [10.0, 10.0, 5.0, 5.0]
    d = run_op("detection.BoxEncode", {"boxes": boxes, "reference": ref}, weights=w)
    b, r = boxes[1, 2].tolist(), ref[1, 2].tolist()
    rw, rh = r[2] - r[0], r[3] - r[1]
    expected = [10 * ((b[0] + b[2]) / 2 - (r[0] + r[2]) / 2) / rw,
                10 * ((b[1] + b[3]) / 2 - (r[1] + r[3]) / 2) / rh,
                5 * math.log((b[2] - b[0]) / rw), 5 * math.log((b[3] - b[1]) / rh)]
    assert d[1, 2].tolist() == pytest.approx(expected)
    back = run_op("detection.BoxDecode", {"deltas": d, "reference": ref}, weights=w)
    assert torch.allclose(back, boxes, atol=1e-9)
    # dw beyond log(1000/16) is clipped, as torchvision's BoxCoder does
    big = bx.decode(torch.tensor([[0.0, 0, 50, 0]]), torch.tensor([[0.0, 0, 1, 1]]))
    assert big[0, 2] - big[0, 0] == pytest.approx(1000 / 16, rel=1e-5)


# -- NMS --------------------------------------------------------------------------------------

def greedy_nms(boxes, scores, labels, threshold, min_score):
    """torchvision.ops.nms / batched_nms written as the textbook loop; kept indices."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    kept = []
    for i in order:
        if scores[i] <= min_score:
            continue
        if all(labels[i] != labels[k] or iou_one(boxes[i], boxes[k]) <= threshold
               for k in kept):
            kept.append(i)
    return kept


@pytest.mark.parametrize("class_aware", [True, False])
def test_nms_against_the_greedy_loop(class_aware):
    gen = torch.Generator().manual_seed(1)
    boxes = random_boxes(4, 30, size=40.0, gen=gen).float()
    scores = torch.rand(4, 30, generator=gen)
    labels = torch.randint(0, 3, (4, 30), generator=gen)
    out_b, out_s, out_l, mask = run_op(
        "detection.NMS", {"boxes": boxes, "scores": scores, "labels": labels},
        iou_threshold=0.3, score_threshold=0.2, max_detections=12, class_aware=class_aware)
    assert out_b.shape == (4, 12, 4) and mask.shape == (4, 12)
    for n in range(4):
        kept = greedy_nms(boxes[n].tolist(), scores[n].tolist(),
                          labels[n].tolist() if class_aware else [0] * 30, 0.3, 0.2)[:12]
        got = int(mask[n].sum())
        assert got == len(kept)
        assert torch.equal(out_b[n, :got], boxes[n, kept])
        assert torch.equal(out_s[n, :got], scores[n, kept])
        assert torch.equal(out_l[n, :got], labels[n, kept])
        assert (out_l[n, got:] == -1).all() and (out_s[n, got:] == 0).all()
    full = [greedy_nms(boxes[n].tolist(), scores[n].tolist(), labels[n].tolist(), 0.3, 0.2)
            for n in range(4)]
    assert sum(map(len, full)) < (scores > 0.2).sum()  # the case suppresses some boxes
    assert max(map(len, full)) > 12  # and truncates some images to max_detections


def test_nms_agrees_with_torchvision():
    ops = torchvision_ops()
    boxes, scores = random_boxes(40).float(), torch.rand(40)
    order, keep = bx.nms(boxes[None], scores[None], torch.ones(1, 40, dtype=torch.bool), 0.4)
    ours = order[0][keep[0]]
    try:
        theirs = ops.nms(boxes, scores, 0.4)
    except Exception as e:
        pytest.skip(f"torchvision's compiled nms does not run here: {type(e).__name__}")
    assert torch.equal(ours, theirs)


# -- RoIAlign / RoIPool -----------------------------------------------------------------------

def bilinear_one(feat, y, x):
    """torchvision's bilinear_interpolate (roi_align_kernel.cpp), scalar by scalar."""
    c, h, w = feat.shape
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return torch.zeros(c, dtype=feat.dtype)
    y, x = max(y, 0.0), max(x, 0.0)
    y_low, x_low = int(y), int(x)
    if y_low >= h - 1:
        y_high = y_low = h - 1
        y = float(y_low)
    else:
        y_high = y_low + 1
    if x_low >= w - 1:
        x_high = x_low = w - 1
        x = float(x_low)
    else:
        x_high = x_low + 1
    ly, lx = y - y_low, x - x_low
    hy, hx = 1 - ly, 1 - lx
    return (hy * hx * feat[:, y_low, x_low] + hy * lx * feat[:, y_low, x_high]
            + ly * hx * feat[:, y_high, x_low] + ly * lx * feat[:, y_high, x_high])


def roi_align_loop(feat, box, p, scale, ratio, aligned):
    offset = 0.5 if aligned else 0.0
    x0, y0, x1, y1 = [v * scale - offset for v in box]
    rw, rh = x1 - x0, y1 - y0
    if not aligned:
        rw, rh = max(rw, 1.0), max(rh, 1.0)
    bh, bw = rh / p, rw / p
    out = torch.zeros(feat.shape[0], p, p, dtype=feat.dtype)
    for ph, pw in itertools.product(range(p), range(p)):
        acc = 0
        for iy, ix in itertools.product(range(ratio), range(ratio)):
            y = y0 + ph * bh + (iy + 0.5) * bh / ratio
            x = x0 + pw * bw + (ix + 0.5) * bw / ratio
            acc = acc + bilinear_one(feat, y, x)
        out[:, ph, pw] = acc / (ratio * ratio)
    return out


def roi_pool_loop(feat, box, p, scale):
    c, h, w = feat.shape
    x0, y0, x1, y1 = [int(math.floor(v * scale + 0.5)) for v in box]  # C round, v >= 0
    rw, rh = max(x1 - x0 + 1, 1), max(y1 - y0 + 1, 1)
    out = torch.zeros(c, p, p, dtype=feat.dtype)
    for ph, pw in itertools.product(range(p), range(p)):
        hs = min(max(math.floor(ph * rh / p) + y0, 0), h)
        he = min(max(math.ceil((ph + 1) * rh / p) + y0, 0), h)
        ws = min(max(math.floor(pw * rw / p) + x0, 0), w)
        we = min(max(math.ceil((pw + 1) * rw / p) + x0, 0), w)
        if he > hs and we > ws:
            out[:, ph, pw] = feat[:, hs:he, ws:we].amax(dim=(1, 2))
    return out


@pytest.mark.parametrize("aligned", [True, False])
def test_roi_align_against_torchvisions_kernel_written_out(aligned):
    feat = torch.randn(2, 3, 9, 11, dtype=torch.float64)
    boxes = torch.tensor([[[4.0, 4, 30, 20], [0, 0, 44, 36], [-6, 10, 8, 40]],
                          [[10.5, 3.2, 12.0, 5.1], [30, 20, 60, 50], [1, 1, 2, 2]]],
                         dtype=torch.float64)
    out = run_op("detection.RoIAlign", {"features": feat, "boxes": boxes}, output_size=3,
                 spatial_scale=0.25, sampling_ratio=2, aligned=aligned)
    assert out.shape == (2, 3, 3, 3, 3)
    for n, k in itertools.product(range(2), range(3)):
        ref = roi_align_loop(feat[n], boxes[n, k].tolist(), 3, 0.25, 2, aligned)
        assert torch.allclose(out[n, k], ref, atol=1e-12), (n, k)


def test_roi_align_passes_gradients_to_the_features_only():
    feat = torch.randn(1, 2, 6, 6, requires_grad=True)
    boxes = torch.tensor([[[2.0, 2, 14, 18]]], requires_grad=True)
    bx.roi_align(feat, boxes, 2, 0.25, 2, True).sum().backward()
    assert feat.grad.abs().sum() > 0 and boxes.grad is None


def test_roi_pool_against_torchvisions_kernel_written_out():
    feat = torch.randn(2, 3, 9, 11, dtype=torch.float64)
    boxes = torch.tensor([[[4.0, 4, 30, 20], [0, 0, 44, 36], [38, 30, 80, 60]],
                          [[10.5, 3.2, 12.0, 5.1], [30, 20, 60, 50], [1, 1, 2, 2]]],
                         dtype=torch.float64)
    out = run_op("detection.RoIPool", {"features": feat, "boxes": boxes}, output_size=3,
                 spatial_scale=0.25)
    for n, k in itertools.product(range(2), range(3)):
        ref = roi_pool_loop(feat[n], boxes[n, k].tolist(), 3, 0.25)
        assert torch.equal(out[n, k], ref), (n, k)


# -- Hungarian matching -----------------------------------------------------------------------

@pytest.mark.parametrize("q,g", [(3, 3), (5, 3), (6, 2), (4, 4)])
def test_hungarian_finds_the_cheapest_assignment_of_all_permutations(q, g):
    rng = np.random.default_rng(q * 10 + g)
    for _ in range(5):
        cost = rng.normal(size=(q, g))
        rows, cols = hd.hungarian(cost)
        best = min(sum(cost[r, c] for c, r in enumerate(perm))
                   for perm in itertools.permutations(range(q), g))
        assert len(set(rows)) == g and sorted(cols) == list(range(g))
        assert cost[rows, cols].sum() == pytest.approx(best)


def test_set_match_minimises_detrs_cost_over_all_permutations():
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 5, 4, generator=gen)
    boxes = random_boxes(2, 5, gen=gen).float()
    gt_boxes = random_boxes(2, 3, gen=gen).float()
    gt_labels = torch.tensor([[0, 2, -1], [1, 1, 0]])
    gt_mask = torch.tensor([[1.0, 1, 0], [1, 1, 1]])
    match = run_op("detection.SetMatch", {"logits": logits, "boxes": boxes,
                                          "target_boxes": gt_boxes, "target_labels": gt_labels,
                                          "target_mask": gt_mask})
    assert match[0, 2] == -1
    for n in range(2):
        real = [j for j in range(3) if gt_mask[n, j] > 0]
        cost = hd.match_cost(logits[n], boxes[n], gt_boxes[n, real], gt_labels[n, real],
                             64, 1.0, 5.0, 2.0)
        chosen = sum(cost[match[n, j], i].item() for i, j in enumerate(real))
        best = min(sum(cost[perm[i], i].item() for i in range(len(real)))
                   for perm in itertools.permutations(range(5), len(real)))
        assert chosen == pytest.approx(best, abs=1e-5)
        assert len(set(match[n, real].tolist())) == len(real)


def test_set_loss_against_its_formula():
    logits = torch.randn(1, 3, 3)  # two classes + no object
    gt = torch.tensor([[[10.0, 10, 30, 30]]])
    boxes = torch.tensor([[[0.0, 0, 8, 8], [12.0, 10, 30, 34], [40.0, 40, 60, 60]]])
    loss = run_op("detection.SetLoss", {"logits": logits, "boxes": boxes, "target_boxes": gt,
                                        "target_labels": torch.tensor([[1]]),
                                        "target_mask": torch.ones(1, 1)}, eos_coef=0.1)
    # the matched query is the one with the lowest cost; recompute the loss by hand
    cost = hd.match_cost(logits[0], boxes[0], gt[0], torch.tensor([1]), 64, 1, 5, 2)
    q = int(cost[:, 0].argmin())
    target = torch.tensor([2, 2, 2])
    target[q] = 1
    logp = logits[0].log_softmax(-1)
    w = torch.tensor([0.1 if t == 2 else 1.0 for t in target])
    ce = -(w * logp[torch.arange(3), target]).sum() / w.sum()
    l1 = (bx.xyxy_to_cxcywh(boxes[0, q]) - bx.xyxy_to_cxcywh(gt[0, 0])).abs().sum() / 64
    giou = 1 - giou_one(boxes[0, q].tolist(), gt[0, 0].tolist())
    assert loss.item() == pytest.approx((ce + 5 * l1 + 2 * giou).item(), rel=1e-5)


# -- the grid (YOLO) head ---------------------------------------------------------------------

def test_grid_encoding_puts_each_box_in_the_cell_of_its_centre_and_decodes_back():
    boxes = torch.tensor([[[0.0, 0, 16, 16], [40, 20, 60, 30], [0, 0, 0, 0]]])
    labels, mask = torch.tensor([[2, 1, -1]]), torch.tensor([[1.0, 1, 0]])
    t = run_op("detection.GridEncode", {"boxes": boxes, "labels": labels, "mask": mask},
               grid=8, image_size=64, anchor=16)
    assert t.shape == (1, 8, 8, 6) and t[..., 0].sum() == 2
    assert t[0, 1, 1].tolist() == pytest.approx([1, 0, 0, 0, 0, 2])  # centre (8, 8): cell 1,1
    assert t[0, 3, 6].tolist() == pytest.approx([1, 0.25, 0.125, math.log(20 / 16),
                                                 math.log(10 / 16), 1])
    back = hd.target_boxes(t, 64, 16)
    assert back[0, 1, 1].tolist() == pytest.approx([0, 0, 16, 16])
    assert back[0, 3, 6].tolist() == pytest.approx([40, 20, 60, 30])
    # a head that outputs the codes (logit of the offsets) decodes to the same boxes
    head = torch.zeros(1, 8, 8, 8)
    head[..., 0] = torch.where(t[..., 0] > 0, 10.0, -10.0)
    head[..., 1:3] = torch.logit(t[..., 1:3].clamp(1e-6, 1 - 1e-6))
    head[..., 3:5] = t[..., 3:5]
    head[..., 5:] = torch.nn.functional.one_hot(t[..., 5].long(), 3) * 10.0
    b, s, lab = run_op("detection.GridDecode", {"input": head.permute(0, 3, 1, 2)})
    best = s[0].topk(2).indices
    assert torch.allclose(b[0, best].sort(0).values, boxes[0, :2].sort(0).values, atol=1e-3)
    assert sorted(lab[0, best].tolist()) == [1, 2]


def test_yolo_loss_against_its_formula():
    gen = torch.Generator().manual_seed(5)
    head = torch.randn(2, 8, 4, 4, generator=gen)
    boxes = torch.tensor([[[2.0, 3, 20, 30]], [[30, 40, 60, 62]]])
    target = hd.grid_encode(boxes, torch.tensor([[0], [2]]), torch.ones(2, 1), 4, 64, 16)
    for box_loss in ("giou", "smooth_l1"):
        loss = run_op("detection.YOLOLoss", {"input": head, "target": target},
                      box_loss=box_loss, w_obj=1.0, w_noobj=0.5, w_box=5.0, w_cls=1.0)
        t = head.permute(0, 2, 3, 1)
        total = 0.0
        for n, i, j in itertools.product(range(2), range(4), range(4)):
            obj = target[n, i, j, 0].item()
            p = torch.sigmoid(t[n, i, j, 0]).item()
            bce = -(obj * math.log(p) + (1 - obj) * math.log(1 - p))
            if obj == 0:
                total += 0.5 * bce
                continue
            total += bce
            if box_loss == "giou":
                s = 16
                cx = (j + torch.sigmoid(t[n, i, j, 1]).item()) * s
                cy = (i + torch.sigmoid(t[n, i, j, 2]).item()) * s
                w, h = 16 * math.exp(t[n, i, j, 3]), 16 * math.exp(t[n, i, j, 4])
                pred = [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]
                total += 5 * (1 - giou_one(pred, boxes[n, 0].tolist()))
            else:
                p4 = [torch.sigmoid(t[n, i, j, 1]).item(), torch.sigmoid(t[n, i, j, 2]).item(),
                      t[n, i, j, 3].item(), t[n, i, j, 4].item()]
                for a, b in zip(p4, target[n, i, j, 1:5].tolist(), strict=True):
                    d = abs(a - b)
                    total += 5 * (0.5 * d * d if d < 1 else d - 0.5)
            total += -t[n, i, j, 5:].log_softmax(-1)[int(target[n, i, j, 5])].item()
        assert loss.item() == pytest.approx(total / 2, rel=1e-5)


# -- the second stage (R-CNN) ----------------------------------------------------------------

def test_roi_head_loss_against_its_formula():
    proposals = torch.tensor([[[10.0, 10, 30, 30], [0, 0, 5, 5], [40, 40, 60, 58]]])
    gt = torch.tensor([[[12.0, 10, 30, 32], [41, 40, 60, 60]]])
    labels, mask = torch.tensor([[0, 2]]), torch.ones(1, 2)
    logits, deltas = torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    w = [10.0, 10.0, 5.0, 5.0]
    loss = run_op("detection.RoIHeadLoss", {
        "logits": logits, "deltas": deltas, "proposals": proposals, "boxes": gt,
        "labels": labels, "mask": mask}, weights=w, w_box=1.0)
    classes = torch.tensor([0, 3, 2])  # proposal 1 overlaps nothing: background (3)
    ce = torch.nn.functional.cross_entropy(logits[0], classes, reduction="sum") / 3
    reg = 0.0
    for k, g in ((0, 0), (2, 1)):
        target = bx.encode(gt[0, g], proposals[0, k], w)
        d = (deltas[0, k] - target).abs()
        reg += torch.where(d < 1 / 9, 0.5 * d * d * 9, d - 0.5 / 9).sum() / 3
    assert loss.item() == pytest.approx((ce + reg).item(), rel=1e-5)


def test_class_scores_leave_out_the_background():
    logits = torch.tensor([[[0.0, 1.0, 5.0], [3.0, 0.0, 0.0]]])
    scores, labels = run_op("detection.ClassScores", {"logits": logits})
    p = logits.softmax(-1)
    assert labels.tolist() == [[1, 0]]
    assert scores[0].tolist() == pytest.approx([p[0, 0, 1].item(), p[0, 1, 0].item()])


# -- mAP against COCOeval ---------------------------------------------------------------------

def fixed_detections(seed: int, n: int = 12, d: int = 9, g: int = 4, classes: int = 3):
    """True boxes and detections near them (some exact, some shifted, some spurious)."""
    gen = torch.Generator().manual_seed(seed)
    gt = random_boxes(n, g, gen=gen).float().round()
    gt_labels = torch.randint(0, classes, (n, g), generator=gen)
    gt_mask = (torch.rand(n, g, generator=gen) < 0.8).float()
    pick = torch.randint(0, g, (n, d), generator=gen)
    det = torch.gather(gt, 1, pick[..., None].expand(n, d, 4))
    det = det + torch.randn(n, d, 4, generator=gen) * torch.rand(n, d, 1, generator=gen) * 6
    det[..., 2:] = torch.maximum(det[..., 2:], det[..., :2] + 1)
    labels = torch.where(torch.rand(n, d, generator=gen) < 0.8,
                         torch.gather(gt_labels, 1, pick),
                         torch.randint(0, classes, (n, d), generator=gen))
    scores = torch.rand(n, d, generator=gen)
    mask = (torch.rand(n, d, generator=gen) < 0.9).float()
    return det, scores, labels, mask, gt, gt_labels, gt_mask


def coco_reference(det, scores, labels, mask, gt, gt_labels, gt_mask):
    """(mAP@0.5, @0.75, @[.5:.95]) from pycocotools' COCOeval on the same boxes."""
    coco_mod = pytest.importorskip("pycocotools.coco", reason="pycocotools is an optional "
                                   "extra (pip install .[detection])")
    from pycocotools.cocoeval import COCOeval

    def xywh(b):
        return [float(b[0]), float(b[1]), float(b[2] - b[0]), float(b[3] - b[1])]

    images, anns, dets = [], [], []
    for i in range(len(gt)):
        images.append({"id": i, "width": 64, "height": 64})
        for j in range(gt.shape[1]):
            if gt_mask[i, j] > 0:
                w = xywh(gt[i, j].tolist())
                anns.append({"id": len(anns) + 1, "image_id": i, "bbox": w, "area": w[2] * w[3],
                             "category_id": int(gt_labels[i, j]), "iscrowd": 0})
        for j in range(det.shape[1]):
            if mask[i, j] > 0:
                dets.append({"image_id": i, "bbox": xywh(det[i, j].tolist()),
                             "score": float(scores[i, j]), "category_id": int(labels[i, j])})
    truth = coco_mod.COCO()
    truth.dataset = {"images": images, "annotations": anns,
                     "categories": [{"id": c} for c in range(3)]}
    truth.createIndex()
    e = COCOeval(truth, truth.loadRes(dets), "bbox")
    e.evaluate()
    e.accumulate()
    e.summarize()
    return e.stats[1], e.stats[2], e.stats[0]


def evaluate_map(parts, sizes):
    _, _, metric = build("detection.MeanAP", {
        "boxes": parts[0], "scores": parts[1], "labels": parts[2], "mask": parts[3],
        "target_boxes": parts[4], "target_labels": parts[5], "target_mask": parts[6]})
    metric.reset()
    start = 0
    for s in sizes:
        metric.update(*[p[start:start + s] for p in parts])
        start += s
    return metric.compute()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mean_ap_agrees_with_cocoeval(seed):
    parts = fixed_detections(seed)
    ours = evaluate_map(parts, (5, 7))
    ref = coco_reference(*parts)
    assert 0.05 < ours["map"] < 0.95  # a case that is neither trivial nor hopeless
    assert (ours["map_50"], ours["map_75"], ours["map"]) == pytest.approx(ref, abs=1e-9)


def test_mean_ap_agrees_with_torchmetrics():
    try:
        load_torchvision()
        from torchmetrics.detection import MeanAveragePrecision

        reference = MeanAveragePrecision(iou_type="bbox")
    except Exception as e:  # not installed, or torchvision (which it needs) does not import
        pytest.skip(f"torchmetrics' MeanAveragePrecision is unavailable here: "
                    f"{type(e).__name__}: {str(e).splitlines()[0][:80]}")
    det, scores, labels, mask, gt, gt_labels, gt_mask = parts = fixed_detections(4)
    preds = [{"boxes": det[i][mask[i] > 0], "scores": scores[i][mask[i] > 0],
              "labels": labels[i][mask[i] > 0]} for i in range(len(det))]
    target = [{"boxes": gt[i][gt_mask[i] > 0], "labels": gt_labels[i][gt_mask[i] > 0]}
              for i in range(len(gt))]
    reference.update(preds, target)
    ref = reference.compute()
    ours = evaluate_map(parts, (12,))
    assert ours["map_50"] == pytest.approx(float(ref["map_50"]), abs=1e-6)
    assert ours["map"] == pytest.approx(float(ref["map"]), abs=1e-6)


def test_mean_ap_of_perfect_and_of_no_detections():
    gt = torch.tensor([[[0.0, 0, 10, 10], [20, 20, 40, 30]]])
    truth = [gt, torch.tensor([[0, 1]]), torch.ones(1, 2)]
    perfect = evaluate_map([gt, torch.tensor([[0.9, 0.8]]), torch.tensor([[0, 1]]),
                            torch.ones(1, 2), *truth], (1,))
    # COCOeval's precision tp / (tp + fp + eps) stays a hair under 1
    assert perfect == pytest.approx({"map_50": 1.0, "map_75": 1.0, "map": 1.0}, abs=1e-12)
    none = evaluate_map([gt, torch.zeros(1, 2), torch.tensor([[0, 1]]), torch.zeros(1, 2),
                         *truth], (1,))
    assert none == {"map_50": 0.0, "map_75": 0.0, "map": 0.0}


# -- validation -------------------------------------------------------------------------------

def test_shape_errors_name_the_port():
    meta = {"boxes": torch.empty(2, 5, 3), "scores": torch.empty(2, 5)}
    with pytest.raises(PortError) as e:
        build("detection.NMS", meta)
    assert e.value.port == "boxes" and "(N, K, 4)" in str(e.value)
    with pytest.raises(PortError) as e:
        build("detection.YOLOLoss", {"input": torch.empty(2, 8, 4, 4),
                                     "target": torch.empty(2, 8, 8, 6)})
    assert e.value.port == "target" and "grid" in e.value.hint


# -- data -------------------------------------------------------------------------------------

def test_shapes_draws_each_shape_inside_its_box_and_is_seeded():
    a = shapes(40, 64, 1, 3, 10, 24, 0.1, 0.0, seed=7)
    b = shapes(40, 64, 1, 3, 10, 24, 0.1, 0.0, seed=7)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    count = a["mask"].sum(1)
    assert count.min() >= 1 and count.max() <= 3 and set(np.unique(a["labels"])) == {-1, 0, 1, 2}
    assert ((a["labels"] >= 0) == (a["mask"] > 0)).all()
    for i in range(40):
        last = int(count[i]) - 1  # the last shape is painted over nothing
        x0, y0, x1, y1 = a["boxes"][i, last].astype(int)
        assert 10 <= x1 - x0 <= 24 and 0 <= x0 and x1 <= 64
        colour = a["x"][i, :, (y0 + y1) // 2, (x0 + x1) // 2]
        painted = np.all(np.isclose(a["x"][i], colour[:, None, None]), axis=0)
        ys, xs = np.nonzero(painted)
        inside = (xs >= x0) & (xs < x1) & (ys >= y0) & (ys < y1)
        assert inside.mean() > 0.99  # the colour is the shape's, within its box
        # it spans its box (a triangle's apex may fall between pixel centres)
        assert ys.min() - y0 <= 2 and ys.max() == y1 - 1
        assert xs.min() == x0 and xs.max() == x1 - 1
        area = painted[y0:y1, x0:x1].mean()
        expected = {0: 1.0, 1: math.pi / 4, 2: 0.5}[int(a["labels"][i, last])]
        assert area == pytest.approx(expected, abs=0.12)


def write_ppm(path, image: np.ndarray) -> None:
    h, w = image.shape[1:]
    data = (np.clip(image, 0, 1) * 255).round().astype(np.uint8).transpose(1, 2, 0)
    path.write_bytes(f"P6 {w} {h} 255\n".encode() + data.tobytes())


def test_coco_boxes_reads_a_coco_file_and_scales_boxes(tmp_path):
    (tmp_path / "img").mkdir()
    for i in range(3):
        write_ppm(tmp_path / "img" / f"{i}.ppm", np.random.rand(3, 32, 48))
    doc = {"images": [{"id": 10 + i, "file_name": f"{i}.ppm"} for i in range(3)],
           "annotations": [{"image_id": 10, "category_id": 7, "bbox": [4, 8, 12, 16]},
                           {"image_id": 10, "category_id": 3, "bbox": [0, 0, 48, 32]},
                           {"image_id": 12, "category_id": 7, "bbox": [24, 16, 6, 4]}],
           "categories": [{"id": 7, "name": "cat"}, {"id": 3, "name": "dog"}]}
    (tmp_path / "ann.json").write_text(json.dumps(doc))
    _, _, ds = build("data.CocoBoxes", path=str(tmp_path / "ann.json"),
                     images=str(tmp_path / "img"), size=64, val_fraction=0.0, shuffle=False)
    t = ds.tensors("train")
    assert t["x"].shape == (3, 3, 64, 64) and t["boxes"].shape == (3, 2, 4)
    assert t["labels"].tolist() == [[1, 0], [-1, -1], [1, -1]]  # ids 3 -> 0, 7 -> 1
    assert t["mask"].tolist() == [[1, 1], [0, 0], [1, 0]]
    sx, sy = 64 / 48, 64 / 32
    assert t["boxes"][0, 0].tolist() == pytest.approx([4 * sx, 8 * sy, 16 * sx, 24 * sy])
    assert t["boxes"][2, 0].tolist() == pytest.approx([24 * sx, 16 * sy, 30 * sx, 20 * sy])


def test_coco_boxes_names_what_is_wrong_in_the_file(tmp_path):
    write_ppm(tmp_path / "a.ppm", np.zeros((3, 8, 8)))
    doc = {"images": [{"id": 1, "file_name": "a.ppm"}],
           "annotations": [{"image_id": 1, "category_id": 5, "bbox": [0, 0, 2, 2]}],
           "categories": [{"id": 1, "name": "x"}]}
    (tmp_path / "ann.json").write_text(json.dumps(doc))
    g = nodegraph.Graph("coco")
    g.add("data.CocoBoxes", id="data", path=str(tmp_path / "ann.json"), val_fraction=0.0)
    report = nodegraph.validate(g)
    assert not report.ok
    problem = report.problems[0]
    assert problem.node == "data" and "annotations[0]" in problem.message
    assert "category_id" in problem.message
